#!/usr/bin/env bash
# The main job: the seed's MoE LoRA fine-tuning benchmark (OLMoE architecture at a CPU-sized
# "tiny" scale), eager vs stock ThunderFX vs ThunderFX with dyngen, one after another in one
# invocation; prints step times, ratios against eager and every compile event side by side, and
# writes results/moe_peft/olmoe-tiny.{json,png}. Extra arguments go to the benchmark, e.g.
#   bash scripts/demo.sh --compile all            (adds Inductor)
#   bash scripts/demo.sh --model microsoft/Phi-3.5-MoE-instruct
# On CPU, dyngen runs each compiled graph with its reference executor (ATen ops, one compile for
# every size; Note [Executor choice]): its compile counts are the point there, not its step times.
# `--dyngen-executor emulate` runs dyngen's generated CUDA kernels under host emulation instead.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/setup.sh
mkdir -p results/moe_peft
exec .venv/bin/python bench/moe_peft/benchmark_peft.py \
  --model allenai/OLMoE-1B-7B-0924 --scale tiny --compile eager,thunder,dyngen \
  --max-steps 10 --warmup-steps 2 --mbs 1 --seq-length 128 \
  --json results/moe_peft/olmoe-tiny.json --plot results/moe_peft/olmoe-tiny.png "$@"
