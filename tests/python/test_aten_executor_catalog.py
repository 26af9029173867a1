"""The ATen executor (DYNGEN_EXECUTOR=reference's CPU path) evaluates exactly the ops of ir/ops.def:
a new op without an ATen evaluation fails here, not at a user's first call
(docs/adding_an_op.md, step 5)."""

import re
from pathlib import Path

from dyngen.executors import aten_executor

REPO = Path(__file__).resolve().parents[2]


def catalog() -> set[str]:
    return set(re.findall(r'DG_OP\(\s*\w+,\s*"(\w+)"', (REPO / "ir" / "ops.def").read_text()))


def test_every_op_has_an_aten_implementation():
    missing = catalog() - aten_executor.EVALUATED_OPS
    assert not missing, f"ops of ir/ops.def the ATen executor cannot run: {sorted(missing)}"


def test_the_executor_names_no_op_the_catalog_lacks():
    stale = aten_executor.EVALUATED_OPS - catalog()
    assert not stale, f"ATen evaluations for ops that ir/ops.def does not have: {sorted(stale)}"
