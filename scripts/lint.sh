#!/usr/bin/env bash
# Python style, run by scripts/test.sh before the tests (and on its own: `bash scripts/lint.sh`):
# `ruff check` and `ruff format --check` over every Python file (settings: [tool.ruff] in
# pyproject.toml, 100 columns). `bash scripts/lint.sh --fix` rewrites the files instead.
# The Python package's layers are checked by tests/python/test_layers.py (import-linter).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
ruff=".venv/bin/ruff"
if [ "${1:-}" = "--fix" ]; then
  "$ruff" check --fix .
  "$ruff" format .
  exit 0
fi
rc=0
"$ruff" check . || rc=1
"$ruff" format --check . || rc=1
[ "$rc" -eq 0 ] || echo "lint: ruff failed; 'bash scripts/lint.sh --fix' rewrites the files" >&2
exit "$rc"
