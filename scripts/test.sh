#!/usr/bin/env bash
# All tests: set-up, the style checks (scripts/lint.sh: ruff and clang-format), then the C++ suite
# (ctest) and the Python suite (pytest).
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
ctest --test-dir build -j "${DYNGEN_JOBS:-$(nproc)}" --output-on-failure
if [ "${DYNGEN_SKIP_PYTHON:-0}" != 1 ]; then
  # Strict (a fallback is an error, Note [No silent fallbacks]) and on the generated kernels
  # under host emulation (Note [Executor choice]), so no test passes by comparing torch with
  # torch; tests of the reference executor say so in their names.
  DYNGEN_STRICT=1 DYNGEN_EXECUTOR=emulate .venv/bin/python -m pytest tests/python tests/bench -q
fi
