#!/usr/bin/env bash
# dyngen on the lent H200 machine: one prepared run, about 8 minutes, every phase under its own
# timeout, everything written to $OUT (one merged JSON, h200.json, plus the log and plots).
#
# The machine (bench/gpu/README.md): Python 3.12 with torch 2.11.0+cu130, transformers 5.x,
# huggingface_hub 1.x, tokenizers 0.23, accelerate, peft; no lightning-thunder; no network; nvcc
# and NVRTC 13.0. The benchmark needs transformers 4.x (per-expert nn.Linear experts, the seed's
# graphs), so these wheels travel in bench/gpu/wheels/ (bench/gpu/fetch_wheels.sh downloads them,
# about 18 MB; the folder is git-ignored, so the device call must carry it):
#     lightning-thunder 0.2.7.dev20260201   dill 0.4.1   looseversion 1.3.0   optree 0.20.0 (cp312)
#     lightning-utilities 0.15.3            transformers 4.57.1   tokenizers 0.22.2 (abi3)
#     huggingface-hub 0.36.2                peft 0.17.1
# They go into a venv made with --system-site-packages (the machine's torch stays), installed with
# --no-deps: everything else they need is already on the machine (check_wheels.py checks that).
#
# libdyngen.so: carry a build from the development machine (same x86-64, same CUDA 13.0):
#     run(command="bash bench/gpu/run_h200.sh", carry=["bench/gpu/wheels", "build/libdyngen.so",
#         "build/dyngen", "build/tests/gpu/gpu_tests"], timeout_s=540)
# build/tests/gpu/gpu_tests is `ctest -L gpu` as one binary (gtest linked in): every codegen
# catalog case and the seed's forward and backward through CudaModule, run first.
# The frontend (frontends/python, on PYTHONPATH) also needs the flatbuffers Python package; its
# wheel is among the carried ones (fetch_wheels.sh).
# Without it the script tries a CMake build there (needs FlatBuffers, range-v3 and nlohmann-json,
# which the machine's image may lack; set DYNGEN_DEPS_PREFIX to a carried prefix that has them).
# If neither works, dyngen runs with its reference executor (PyTorch ops) and every figure says so.
#
# Phases and limits (seconds; override with the variables):
#   probes     LIMIT_PROBES=90     tests/gpu/probe_test.cc: ldmatrix, mma, bf16, wgmma and TMA on
#                                  the device against their emulation twins, bit for bit
#   setup      LIMIT_SETUP=60      venv + wheels + import check
#   library    LIMIT_LIB=150       libdyngen.so: carried, or built
#   numerics   LIMIT_NUMERICS=75   bench/gpu/check_numerics.py: dyngen vs eager, 22 token counts,
#                                  the OLMoE/PhiMoE/DBRX expert graphs at published sizes, fwd+bwd
#   calibration LIMIT_CALIBRATION=90 bench/gpu/calibrate_model.py: each dyngen kernel's device time
#                                  (torch.profiler) beside `dyngen plan`'s estimate, the same expert
#                                  graphs, fwd and bwd, s in CALIBRATION_TOKENS; needs the CLI
#                                  (carry build/dyngen, stripped); RUN_CALIBRATION=0 skips it
#   bench      LIMIT_MODEL=110 each the seed's four commands with --fixed-num-hidden-layers 2,
#                                  MAX_STEPS=4 (WARMUP=2), backends eager,dyngen,dyngen-loop,
#                                  inductor,thunder,
#                                  each under BACKEND_TIMEOUTS (in-process alarm); RUN_MODELS=0
#                                  skips them
#   sanitizer  LIMIT_SANITIZER=60  each of memcheck, racecheck, synccheck over gpu_tests
#              per tool            (SANITIZER_FILTER), when compute-sanitizer exists;
#                                  RUN_SANITIZER=0 skips it
#   kernels    LIMIT_KERNELS=150   bench/gpu/kernel_bench.py: expert MLP fwd+bwd at OLMoE, Phi-3.5-
#                                  MoE and DBRX shapes, s in KERNEL_TOKENS, dyngen vs eager vs
#                                  torch.compile(dynamic=True); RUN_KERNELS=0 skips it
#   grouped    LIMIT_GROUPED=150   bench/gpu/grouped_bench.py: one MoE block (router + experts,
#                                  LoRA) fwd+bwd at OLMoE, Phi-3.5-MoE and DBRX sizes, T in
#                                  GROUPED_TOKENS: dyngen grouped vs the model's expert loop vs
#                                  torch._grouped_mm, with numerics against the loop;
#                                  RUN_GROUPED=0 skips it
# The bench phase's backends include dyngen-loop (moe="loop"), so the step times read eager vs
# dyngen's per-expert route vs dyngen's grouped experts (and Inductor, stock ThunderFX).
# The phases' limits add up to more than one device command's 600 s: when the earlier phases run
# long, run the kernel benchmark as a second command (RUN_NUMERICS=0 RUN_MODELS=0
# RUN_SANITIZER=0).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
OUT="${OUT:-$repo/results/h200}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1

LIMIT_SETUP="${LIMIT_SETUP:-60}"
LIMIT_LIB="${LIMIT_LIB:-150}"
LIMIT_NUMERICS="${LIMIT_NUMERICS:-75}"
LIMIT_MODEL="${LIMIT_MODEL:-110}"
LIMIT_KERNELS="${LIMIT_KERNELS:-150}"
KERNEL_TOKENS="${KERNEL_TOKENS:-64,256,512,1024,2048,4096}"
RUN_NUMERICS="${RUN_NUMERICS:-1}" # 0: skip check_numerics.py
RUN_MODELS="${RUN_MODELS:-1}"     # 0: skip the seed's four commands
RUN_KERNELS="${RUN_KERNELS:-1}"   # 0: skip the kernel benchmark
RUN_GROUPED="${RUN_GROUPED:-1}"   # 0: skip the grouped MoE layer benchmark
LIMIT_GROUPED="${LIMIT_GROUPED:-150}"
GROUPED_TOKENS="${GROUPED_TOKENS:-512,1024,2048,4096,8192}"
MAX_STEPS="${MAX_STEPS:-4}"
WARMUP="${WARMUP:-2}"
SEQ="${SEQ:-4096}"
BACKENDS="${BACKENDS:-eager,dyngen,dyngen-loop,inductor,thunder}"
BACKEND_TIMEOUTS="${BACKEND_TIMEOUTS:-eager=12,dyngen=30,dyngen-loop=20,inductor=18,thunder=15}"
DEVICE="${DEVICE:-cuda}"        # cpu and SCALE=tiny: a local dry run of this script
SCALE="${SCALE:-full}"
VENV="${VENV:-/tmp/dyngen-venv}"
WORK="${WORK:-/tmp/dyngen-h200}"
mkdir -p "$WORK"
PHASES="$WORK/phases.tsv"
: > "$PHASES"
t_start=$(date +%s)

phase() {  # phase NAME LIMIT COMMAND...: runs it under timeout, records rc and seconds
  local name="$1" limit="$2"; shift 2
  local t0 rc
  t0=$(date +%s)
  echo "=== phase $name (limit ${limit}s, at $(( t0 - t_start ))s)"
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  [ "$rc" = 124 ] && echo "=== phase $name: TIMEOUT after ${limit}s"
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$limit" >> "$PHASES"
  echo "=== phase $name: rc=$rc in $(( $(date +%s) - t0 ))s"
  return "$rc"
}

# ---- facts ---------------------------------------------------------------------------------------
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>&1
  command -v nvcc && nvcc --version | tail -1
  nproc
} | tee "$WORK/facts.txt"

# ---- setup: venv with the machine's torch, plus the carried wheels --------------------------------
setup() {
  set -e
  ls bench/gpu/wheels/*.whl >/dev/null
  python3 -m venv --system-site-packages "$VENV"
  "$VENV/bin/python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    bench/gpu/wheels/*.whl
  "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import thunder, transformers, peft, torch, flatbuffers  # noqa: F401
from transformers import OlmoeForCausalLM, PhimoeForCausalLM, DbrxForCausalLM  # noqa: F401
for n in ("torch", "lightning-thunder", "transformers", "peft", "tokenizers", "huggingface-hub",
          "accelerate", "safetensors", "numpy", "optree", "flatbuffers", "mpmath", "networkx"):
    print(f"{n} {md.version(n)}")
assert transformers.__version__ == "4.57.1", transformers.__version__
EOF
}
export VENV WORK repo
export -f setup
PY=python3
if [ -n "${USE_PY:-}" ]; then  # a local dry run: an existing environment, no wheels
  PY="$USE_PY"
  echo "=== phase setup skipped: USE_PY=$USE_PY"
elif phase setup "$LIMIT_SETUP" bash -c setup; then
  PY="$VENV/bin/python"
else
  echo "setup failed: the benchmark needs transformers 4.57 and thunder; the runs below will" >&2
  echo "report what fails with the machine's own packages" >&2
fi
export PY

# ---- libdyngen.so ----------------------------------------------------------------------------------
export PYTHONPATH="$repo/frontends/python${PYTHONPATH:+:$PYTHONPATH}"
export DYNGEN_CACHE_DIR="$WORK/dyngen-cache"
nvrtc_dirs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && nvrtc_dirs="$nvrtc_dirs$d:"
done
torch_nv="$("$PY" -c 'import os, nvidia; print(":".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null || true)"
export LD_LIBRARY_PATH="${nvrtc_dirs}${torch_nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
library() {
  set -e
  if [ -f build/libdyngen.so ]; then
    echo "using the carried build/libdyngen.so"
    echo "$repo/build/libdyngen.so" > "$WORK/lib_path"
  else
    echo "no carried build/libdyngen.so: building with CMake"
    local prefix=()
    [ -n "${DYNGEN_DEPS_PREFIX:-}" ] && prefix=(-DCMAKE_PREFIX_PATH="$DYNGEN_DEPS_PREFIX")
    cmake -S . -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDYNGEN_BUILD_TESTS=OFF \
      -DDYNGEN_BUILD_BENCH=OFF -DDYNGEN_BUILD_FUZZ=OFF "${prefix[@]}"
    cmake --build "$WORK/build" -j "$(nproc)"
    find "$WORK/build" -name libdyngen.so | head -1 > "$WORK/lib_path"
  fi
  DYNGEN_LIB="$(cat "$WORK/lib_path")" DYNGEN_EXECUTOR=capi "$PY" -c '
import dyngen, torch
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
print("dyngen executor:", dyngen.executor_kind(), "| GPU:", gpu)'
}
export -f library
if phase library "$LIMIT_LIB" bash -c library; then
  DYNGEN_LIB="$(cat "$WORK/lib_path")"
  export DYNGEN_LIB
  export DYNGEN_EXECUTOR=capi
  EXECUTOR=capi
else
  echo "libdyngen.so unavailable: dyngen runs with its reference executor (PyTorch ops); its"
  echo "step times then say nothing about the generated kernels"
  export DYNGEN_EXECUTOR=reference
  EXECUTOR=reference
fi

# ---- probes: each twin-covered primitive on the device against its emulation, bit for bit --------
# (Note [GPU probes] in tests/gpu/probe_test.cc): ldmatrix, mma.sync, bf16 conversion, wgmma's
# accumulator layout and swizzled operands, the TMA box. First, because a mismatch here means the
# emulated tests upstream of every other phase are wrong about the hardware. Needs g++ for the
# emulation side.
LIMIT_PROBES="${LIMIT_PROBES:-90}"
if [ -x build/tests/gpu/gpu_tests ]; then
  phase probes "$LIMIT_PROBES" build/tests/gpu/gpu_tests --gtest_filter='GpuProbe.*' \
    --gtest_output="json:$OUT/probes.json"
else
  echo "=== phase probes skipped: build/tests/gpu/gpu_tests was not carried"
fi

# ---- ctest -L gpu: the codegen catalog and the seed numerics through CudaModule --------------------
LIMIT_GPU_TESTS="${LIMIT_GPU_TESTS:-120}"
if [ -x build/tests/gpu/gpu_tests ]; then
  phase gpu-tests "$LIMIT_GPU_TESTS" build/tests/gpu/gpu_tests --gtest_filter='-GpuProbe.*' \
    --gtest_output="json:$OUT/gpu_tests.json"
else
  echo "=== phase gpu-tests skipped: build/tests/gpu/gpu_tests was not carried"
fi

# ---- the same tests under compute-sanitizer: memcheck, racecheck, synccheck -------------------------
# The emulation's race detector (DYNGEN_EMU_RACECHECK) models shared memory; this is the real
# thing. Each tool runs a GEMM-heavy subset (SANITIZER_FILTER: the seed's forward and backward,
# the catalog's linear and matmul cases) under its own limit, logs to $OUT/sanitizer-TOOL.log,
# and sums up in $OUT/sanitizer.tsv (tool, rc, errors reported, seconds) and h200.json.
# RUN_SANITIZER=0 skips it; sanitized runs are 10-100x slower, so the filter stays small.
RUN_SANITIZER="${RUN_SANITIZER:-1}"
LIMIT_SANITIZER="${LIMIT_SANITIZER:-60}"  # per tool
SANITIZER_FILTER="${SANITIZER_FILTER:-GpuSeed.*:Catalog/GpuOp.*linear*:Catalog/GpuOp.*matmul*}"
sanitizer="$(command -v compute-sanitizer || true)"
[ -z "$sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] &&
  sanitizer=/usr/local/cuda/bin/compute-sanitizer
if [ "$RUN_SANITIZER" != 1 ]; then
  echo "=== phase sanitizer skipped: RUN_SANITIZER=$RUN_SANITIZER"
elif [ -z "$sanitizer" ]; then
  echo "=== phase sanitizer skipped: no compute-sanitizer on this machine"
elif [ ! -x build/tests/gpu/gpu_tests ]; then
  echo "=== phase sanitizer skipped: build/tests/gpu/gpu_tests was not carried"
else
  : > "$OUT/sanitizer.tsv"
  for tool in memcheck racecheck synccheck; do
    t0=$(date +%s)
    extra=()
    [ "$tool" = racecheck ] && extra=(--racecheck-report all)
    phase "sanitizer-$tool" "$LIMIT_SANITIZER" "$sanitizer" --tool "$tool" "${extra[@]}" \
      --error-exitcode 7 --print-limit 20 --log-file "$OUT/sanitizer-$tool.log" \
      build/tests/gpu/gpu_tests --gtest_filter="$SANITIZER_FILTER"
    rc=$?
    # compute-sanitizer ends its log with "ERROR SUMMARY: N errors" (racecheck: "RACECHECK
    # SUMMARY: N hazards displayed").
    errors="$(grep -Eo '(ERROR|RACECHECK) SUMMARY: [0-9]+' "$OUT/sanitizer-$tool.log" 2>/dev/null |
              grep -Eo '[0-9]+$' | tail -1)"
    printf '%s\t%s\t%s\t%s\n' "$tool" "$rc" "${errors:-unknown}" "$(( $(date +%s) - t0 ))" |
      tee -a "$OUT/sanitizer.tsv"
  done
fi

# ---- numerics on the GPU ---------------------------------------------------------------------------
small=(); [ "$SCALE" = tiny ] && small=(--small --device "$DEVICE")
[ "$RUN_NUMERICS" = 1 ] && phase numerics "$LIMIT_NUMERICS" env PYTHONUNBUFFERED=1 "$PY" \
  bench/gpu/check_numerics.py "${small[@]}" --json "$WORK/numerics.json"

# ---- calibration: the performance model against each kernel's measured device time --------------
# bench/gpu/calibrate_model.py: the numerics phase's expert graphs (OLMoE, the seed's; Phi-3.5-MoE;
# DBRX), forward and backward, at s in CALIBRATION_TOKENS; each dyngen kernel's median device time
# per graph call under torch.profiler, joined by kernel name with `dyngen plan --json` of the graph
# the frontend compiled (written under $OUT/calibration/graphs). Writes $OUT/calibration/
# {calibration.md, calibration.json, measured.json}; h200.json holds calibration.json. The plans
# need the CLI (carried build/dyngen); without it every kernel is listed unmatched, and
# `calibrate_model.py --join .../measured.json --out DIR` redoes the join on any machine.
LIMIT_CALIBRATION="${LIMIT_CALIBRATION:-90}"
RUN_CALIBRATION="${RUN_CALIBRATION:-1}"
CALIBRATION_TOKENS="${CALIBRATION_TOKENS:-64,512,1024,4096}"
if [ "$RUN_CALIBRATION" = 1 ]; then
  rm -rf "$OUT/calibration"
  # no new point after LIMIT - 35 s: the plans (one `dyngen plan` per graph and s) come after
  phase calibration "$LIMIT_CALIBRATION" env PYTHONUNBUFFERED=1 "$PY" \
    bench/gpu/calibrate_model.py "${small[@]}" --tokens "$CALIBRATION_TOKENS" \
    --time-limit $(( LIMIT_CALIBRATION - 35 )) --out "$OUT/calibration" \
    --dyngen-cli "$repo/build/dyngen"
  # measuring ran past the limit: the table from what measured.json kept
  if [ ! -f "$OUT/calibration/calibration.json" ] && [ -f "$OUT/calibration/measured.json" ]; then
    phase calibration-join 45 "$PY" bench/gpu/calibrate_model.py \
      --join "$OUT/calibration/measured.json" --out "$OUT/calibration" \
      --dyngen-cli "$repo/build/dyngen"
  fi
else
  echo "=== phase calibration skipped: RUN_CALIBRATION=$RUN_CALIBRATION"
fi

# ---- the seed's four commands --------------------------------------------------------------------
declare -A ATTN=([allenai/OLMoE-1B-7B-0924]=sdpa [microsoft/GRIN-MoE]=sdpa
                 [microsoft/Phi-3.5-MoE-instruct]=eager [Undi95/dbrx-base]=eager)
models=(allenai/OLMoE-1B-7B-0924 microsoft/Phi-3.5-MoE-instruct microsoft/GRIN-MoE Undi95/dbrx-base)
[ "$RUN_MODELS" = 1 ] || models=()
for model in "${models[@]}"; do
  short="$(basename "$model" | cut -d- -f1 | tr '[:upper:]' '[:lower:]')"
  [ "$model" = microsoft/GRIN-MoE ] && short=grin
  phase "bench-$short" "$LIMIT_MODEL" env PYTHONUNBUFFERED=1 "$PY" bench/moe_peft/benchmark_peft.py \
    --model "$model" --trust-remote-code --attn-implementation "${ATTN[$model]}" \
    --max-steps "$MAX_STEPS" --warmup-steps "$WARMUP" --mbs 1 --seq-length "$SEQ" \
    --fixed-num-hidden-layers 2 --compile "$BACKENDS" --isolate none \
    --backend-timeout "$BACKEND_TIMEOUTS" --device "$DEVICE" --scale "$SCALE" \
    --json "$WORK/bench-$short.json" --plot "$OUT/steps-$short.png"
done

# ---- kernel benchmark: expert MLP fwd+bwd, dyngen vs eager vs torch.compile(dynamic=True) ---------
# bench/gpu/kernel_bench.py; it stops starting new points LIMIT_KERNELS - 45 s in (an Inductor
# compile can take that long) and saves after each expert, so a timeout keeps what it measured.
if [ "$RUN_KERNELS" = 1 ]; then
  dry=(); [ "$DEVICE" = cpu ] && dry=(--dry-run)
  phase kernels "$LIMIT_KERNELS" env PYTHONUNBUFFERED=1 "$PY" bench/gpu/kernel_bench.py \
    --tokens "$KERNEL_TOKENS" --time-limit $(( LIMIT_KERNELS - 45 )) --json "$WORK/kernels.json" \
    "${dry[@]}"
fi

# ---- grouped MoE layer: dyngen grouped vs the expert loop vs torch._grouped_mm -------------------
# bench/gpu/grouped_bench.py saves after each point; it starts no new model LIMIT_GROUPED - 60 s in.
if [ "$RUN_GROUPED" = 1 ]; then
  phase grouped "$LIMIT_GROUPED" env PYTHONUNBUFFERED=1 "$PY" bench/gpu/grouped_bench.py \
    --tokens "$GROUPED_TOKENS" --device "$DEVICE" --scale "$SCALE" \
    --time-limit $(( LIMIT_GROUPED - 60 )) --json "$WORK/grouped.json"
fi

# ---- one JSON -------------------------------------------------------------------------------------
"$PY" - "$WORK" "$OUT/h200.json" "$EXECUTOR" <<'EOF'
import json, os, sys
work, out, executor = sys.argv[1:4]
def load(name):
    p = os.path.join(work, name)
    try:
        return json.load(open(p))
    except Exception as e:  # noqa: BLE001
        return {"missing": f"{name}: {e}"}
phases = [dict(zip(("phase", "rc", "seconds", "limit"), l.rstrip("\n").split("\t")))
          for l in open(os.path.join(work, "phases.tsv"))]
def sanitizer_rows():
    p = os.path.join(os.path.dirname(out), "sanitizer.tsv")
    if not os.path.exists(p):
        return {"missing": "no sanitizer run (no compute-sanitizer, no gpu_tests, or skipped)"}
    return [dict(zip(("tool", "rc", "errors", "seconds"), l.rstrip("\n").split("\t")))
            for l in open(p) if l.strip()]
merged = {"facts": open(os.path.join(work, "facts.txt")).read(), "dyngen_executor": executor,
          "phases": phases, "numerics": load("numerics.json"), "kernels": load("kernels.json"),
          "grouped": load("grouped.json"),
          "calibration": load(os.path.join(os.path.dirname(out), "calibration",
                                           "calibration.json")),
          "sanitizer": sanitizer_rows(),
          "bench": {f[6:-5]: load(f) for f in sorted(os.listdir(work))
                    if f.startswith("bench-") and f.endswith(".json")}}
json.dump(merged, open(out, "w"), indent=2, default=str)
print(f"wrote {out}")
for name, b in merged["bench"].items():
    for kind, r in (b.get("backends") or {}).items():
        s = r.get("summary") or {}
        print(f"{name:8s} {kind:9s} {r.get('status'):7s} steady {s.get('steady_ms')} ms  "
              f"after-warm-up events {s.get('compile_events_after_warmup')}  "
              f"total {s.get('compile_events_total')}  {r.get('error', '')[:100]}")
EOF
echo "=== total $(( $(date +%s) - t_start ))s"
