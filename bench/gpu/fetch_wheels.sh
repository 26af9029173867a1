#!/usr/bin/env bash
# Downloads the wheels that bench/gpu/run_h200.sh installs on the H200 machine (which has no
# network) into bench/gpu/wheels/. The folder is git-ignored (never committed), so the device call
# names it in `carry` (bench/gpu/README.md). Run here, on a machine that reaches PyPI:
#     bash bench/gpu/fetch_wheels.sh
# The list (and why each is needed) is in bench/gpu/README.md; keep it in sync with WHEELS below
# and with run_h200.sh's header.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dest="$here/wheels"
pip="${PIP:-}"
if [ -z "$pip" ]; then
  if [ -x "$repo/.venv/bin/pip" ]; then pip="$repo/.venv/bin/pip"; else pip="python3 -m pip"; fi
fi

# name==version, all for CPython 3.12 on manylinux x86_64 (pure-Python ones are py3-none-any).
WHEELS=(
  lightning-thunder==0.2.7.dev20260201   # ThunderFX (the machine has none)
  dill==0.4.1                            # thunder dependency, not on the machine
  looseversion==1.3.0                    # thunder dependency, not on the machine
  optree==0.20.0                         # thunder dependency, not on the machine (binary)
  lightning-utilities==0.15.3            # thunder dependency (pinned to the version tested here)
  transformers==4.57.1                   # per-expert nn.Linear MoE (the machine has 5.x)
  tokenizers==0.22.2                     # transformers 4.57.1 needs >=0.22,<=0.23.0 (machine: 0.23.2)
  huggingface-hub==0.36.2                # transformers 4.57.1 needs <1.0 (machine: 1.x)
  peft==0.17.1                           # LoRA casting the input to fp32 as in the seed
  flatbuffers==2.0.7                     # the frontend writes graph.fb (dyngen/fb_writer.py)
)

mkdir -p "$dest"
rm -f "$dest"/*.whl
for w in "${WHEELS[@]}"; do
  $pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$dest" "$w"
done
ls -la "$dest"
du -ch "$dest"/*.whl | tail -1
