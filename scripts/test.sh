#!/usr/bin/env bash
# All tests: set-up, the style checks (scripts/lint.sh: ruff, clang-format and the Note linter),
# then the C++ suite (ctest) and the Python suite (pytest), side by side.
#   DYNGEN_SKIP_PYTHON=1   C++ only (no Python environment, lint or pytest)
#   DYNGEN_TEST_SERIAL=1   ctest, then pytest, with their output as it comes
#   DYNGEN_JOBS=N          ctest's parallel jobs (default: the cores)
#
# Note [Both suites at once]
# ctest keeps the cores busy with -j, but pytest alone does not: its time goes to Python, to one
# host compiler at a time on a kernel-cache miss, and to emulated launches that use every core
# only while they last, so run one after the other a core idled through much of the Python suite.
# Run together, each fills the other's gaps; the kernel cache they share is safe for concurrent writers (Note [Atomic publish]).
# Each suite's output goes to build/test-logs/ and is printed whole when it ends (ctest's first),
# so the two never interleave; `tail -f build/test-logs/*.log` follows them live.
# ctest starts the longest tests first when it knows their times (Testing/Temporary/
# CTestCostData.txt in the build folder); a fresh build folder starts from tests/ctest_costs.txt,
# the times of an earlier run, so the minutes-long emulation tests do not start last.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/setup.sh
if [ "${DYNGEN_SKIP_PYTHON:-0}" != 1 ]; then
  bash scripts/lint.sh
fi
# Kernel binaries go to a cache folder of the test run's own, so tests see cold and warm caches
# as they expect; the user's cache is left alone.
export DYNGEN_CACHE_DIR="${DYNGEN_TEST_CACHE_DIR:-$repo/build/test-cache}"

costs="build/Testing/Temporary/CTestCostData.txt"
if [ ! -f "$costs" ] && [ -f tests/ctest_costs.txt ]; then
  mkdir -p "$(dirname "$costs")"
  cp tests/ctest_costs.txt "$costs"
fi
run_ctest() { ctest --test-dir build -j "${DYNGEN_JOBS:-$(nproc)}" --output-on-failure; }
# Strict (a fallback is an error, Note [No silent fallbacks]) and on the generated kernels under
# host emulation (Note [Executor choice]), so no test passes by comparing torch with torch; tests
# of the ATen executor (DYNGEN_EXECUTOR=reference) say so in their names.
run_pytest() {
  local rc=0
  DYNGEN_STRICT=1 DYNGEN_EXECUTOR=emulate .venv/bin/python -m pytest tests/python tests/bench -q \
    --durations=15 || rc=$?
  # The second Hugging Face generation (transformers 5 + PEFT 0.21, the .venv-hf5 overlay of
  # scripts/setup.sh): the tests that need it, which must not skip there (DYNGEN_REQUIRE_HF5).
  DYNGEN_REQUIRE_HF5=1 PYTHONPATH=.venv-hf5 DYNGEN_STRICT=1 DYNGEN_EXECUTOR=emulate \
    .venv/bin/python -m pytest tests/python/test_hf5_models.py tests/bench/test_upstream_peft_hf5.py -q \
    || rc=$?
  return "$rc"
}

if [ "${DYNGEN_SKIP_PYTHON:-0}" = 1 ]; then
  run_ctest
  exit 0
fi
if [ "${DYNGEN_TEST_SERIAL:-0}" = 1 ]; then
  run_ctest
  run_pytest
  exit 0
fi

logs="build/test-logs"
mkdir -p "$logs"
echo "test: ctest and pytest side by side (Note [Both suites at once]); logs in $logs/"
run_ctest > "$logs/ctest.log" 2>&1 &
ctest_pid=$!
run_pytest > "$logs/pytest.log" 2>&1 &
pytest_pid=$!
ctest_rc=0 pytest_rc=0
wait "$ctest_pid" || ctest_rc=$?
cat "$logs/ctest.log"
wait "$pytest_pid" || pytest_rc=$?
cat "$logs/pytest.log"
if [ "$ctest_rc" -ne 0 ] || [ "$pytest_rc" -ne 0 ]; then
  echo "test: ctest exited $ctest_rc, pytest exited $pytest_rc" >&2
  exit 1
fi
