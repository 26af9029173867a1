#!/usr/bin/env bash
# The main job. Until the MoE benchmark lands: the seed's expert MLP (OLMoE, LoRA on gate/up/down)
# compiled once and run for many token counts under host emulation, each run a new process that
# finds the kernels in the disk cache, each checked against the reference evaluator.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/setup.sh
export DYNGEN_CACHE_DIR="${DYNGEN_CACHE_DIR:-$repo/build/demo-cache}"
graph=tests/fixtures/seed_expert_mlp.dgir
echo "== compile (first process): expect a cache miss and 1 compile"
build/dyngen compile "$graph" --arch host
for s in 2 17 129 500; do
  echo "== run s77=$s in a new process (kernels come from the disk cache)"
  build/dyngen run "$graph" --bind "s77=$s"
done
echo "== compile again (new process): expect a disk hit and 0 compiles"
build/dyngen compile "$graph" --arch host
