"""A few of Thunder's own ThunderFX tests (the installed wheel's thunder/tests/test_dynamo.py) with
dyngen swapped in, in the normal test run; tests/thunder_suite/run_thunder_suite.py runs them all,
stock and swapped (see README.md)."""

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "thunder_suite"))

import run_thunder_suite as suite  # noqa: E402

# tolist (symbols made inside the graph: dyngen takes it, partly as ATen ops), a static graph read
# through the drop-in object's last_traces, and cat (static and automatic dynamic).
SELECTED = "test_thunderfx_tolist or test_thunderfx_last_traces or test_cat_no_split"


def test_selected_thunder_tests_pass_with_dyngen(tmp_path):
    missing = [m for m in ("hypothesis", "pytest_benchmark") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"Thunder's test module needs {', '.join(missing)} (requirements.txt)")
    results = suite.run_pytest("dyngen", f"{suite.CPU_ONLY} and ({SELECTED})", tmp_path)
    assert len(results) >= 3, results
    bad = {k: v for k, v in results.items() if v[0] != "passed"}
    assert not bad, bad
