#!/usr/bin/env bash
# Style checks, run by scripts/test.sh before the tests (and on their own: `bash scripts/lint.sh`):
#   ruff check, ruff format --check   every Python file ([tool.ruff] in pyproject.toml, 100 columns)
#   clang-format --dry-run --Werror   every C++ and CUDA source (.clang-format: Google, 100 columns)
#   scripts/lint_notes.py             every Note reference names one heading, every heading is
#                                     referenced (the rules at the top of that file)
# `bash scripts/lint.sh --fix` rewrites the files instead. The Python package's layers are checked
# by tests/python/test_layers.py (import-linter).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
ruff=".venv/bin/ruff"
clang_format="$(command -v clang-format || command -v clang-format-14)"
cxx_files() { git ls-files '*.cc' '*.h' '*.cuh' '*.cu'; }
if [ "${1:-}" = "--fix" ]; then
  "$ruff" check --fix .
  "$ruff" format .
  cxx_files | xargs "$clang_format" -i
  exit 0
fi
rc=0
"$ruff" check . || rc=1
"$ruff" format --check . || rc=1
cxx_files | xargs "$clang_format" --dry-run --Werror || rc=1
python3 scripts/lint_notes.py >/dev/null || { python3 scripts/lint_notes.py >&2; rc=1; }
[ "$rc" -eq 0 ] || echo "lint: style checks failed; 'bash scripts/lint.sh --fix' rewrites the files" >&2
exit "$rc"
