#!/usr/bin/env bash
# One idempotent set-up path for a fresh machine: Debian packages, the CMake build in build/,
# the Python environment in .venv and its transformers 5 overlay in .venv-hf5. Every other
# script calls this first.
#   DYNGEN_SKIP_PYTHON=1   skip the Python environment (C++ only)
#   DYNGEN_BUILD_TYPE=...  CMake build type (default RelWithDebInfo)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

packages=(cmake g++ make clang libclang-rt-14-dev flatbuffers-compiler libflatbuffers-dev
          librange-v3-dev nlohmann-json3-dev libssl-dev libgtest-dev libgmock-dev libbenchmark-dev
          python3-venv ccache clang-format)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "setup: the CUDA toolkit (NVRTC) is required at /usr/local/cuda" >&2
  exit 1
fi

jobs="${DYNGEN_JOBS:-$(nproc)}"
# ccache (in the user's cache folder, ~/.cache/ccache, or $CCACHE_DIR) makes a fresh clone's
# build on a machine that built dyngen before mostly cache hits.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # Hits across clones in other folders (CI clones afresh): paths relative to the clone.
  export CCACHE_BASEDIR="$repo" CCACHE_NOHASHDIR=1
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE="${DYNGEN_BUILD_TYPE:-RelWithDebInfo}" "${launcher[@]}" \
  >/dev/null
cmake --build build -j "$jobs"

if [ "${DYNGEN_SKIP_PYTHON:-0}" != 1 ]; then
  # The venv is rebuilt only when requirements.txt changes (its hash is stored inside).
  stamp=".venv/.requirements.sha256"
  want="$(sha256sum requirements.txt frontends/python/pyproject.toml 2>/dev/null | sha256sum | cut -c1-64)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -r requirements.txt
    .venv/bin/pip install -q --no-deps -e frontends/python
    echo "$want" > "$stamp"
  fi
  # The second Hugging Face generation (transformers 5 + PEFT 0.21) as an overlay beside the
  # venv's torch and Thunder: `PYTHONPATH=.venv-hf5 .venv/bin/python` imports it first. Rebuilt
  # only when requirements-hf5.txt changes; the venv itself is never touched.
  stamp5=".venv-hf5/.requirements.sha256"
  want5="$(sha256sum requirements-hf5.txt | cut -c1-64)"
  if [ ! -f "$stamp5" ] || [ "$(cat "$stamp5")" != "$want5" ]; then
    rm -rf .venv-hf5
    .venv/bin/pip install -q --target .venv-hf5 --no-deps -r requirements-hf5.txt
    echo "$want5" > "$stamp5"
  fi
fi
