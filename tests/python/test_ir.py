"""The frontend's IR is the core's (Note [One IR] in dyngen/core/ir.py): graphs are built through
the C API, which types every node and canonicalizes every symbolic expression; these tests check
what the frontend relies on from it (dtype codes, typing results and errors, expression handles)."""

import re

import pytest
from conftest import REPO

from dyngen.core.ir import (
    POS_INF,
    GraphBuilder,
    IRTypeError,
    SymList,
    ceildiv,
    floordiv,
    mod,
    provably_ge,
    sym_max,
    sym_min,
)
from dyngen.core.ops import DType


def test_dtypes_match_dtype_h():
    text = (REPO / "ir" / "dtype.h").read_text()
    rows = re.findall(r'X\(k\w+,\s*(\d+),\s*"(\w+)",\s*(\d+),\s*(true|false)\)', text)
    assert len(rows) == len(DType)
    for code, name, size, is_float in rows:
        d = DType(int(code))
        assert (d.text, d.itemsize, d.is_float) == (name, int(size), is_float == "true")


def test_builder_types_through_the_core():
    b = GraphBuilder()
    s = b.symbol("s0")
    x = b.input(DType.BF16, [s, 64])
    c = b.op("constant", [], {"dtype": DType.F32, "value": 2.0})
    assert b.tensor(b.op("mul", [x, c])).dtype == DType.BF16  # rank-0: no promotion
    y = b.input(DType.F32, [s, 64])
    assert b.tensor(b.op("add", [x, y])).dtype == DType.F32
    i = b.input(DType.I64, [s])
    assert str(b.tensor(b.op("index_select", [x, i], {"dim": 0}))) == "bf16[s0, 64]"
    r = b.op("reshape", [x], {"shape": SymList([2 * s, 32])})
    assert str(b.tensor(r)) == "bf16[2*s0, 32]"
    sl = b.op("slice", [y], {"dim": 0, "start": SymList([0]), "end": SymList([s]), "step": 2})
    assert b.tensor(sl).shape[0] == floordiv(s + 1, 2)  # the core's canonical form
    with pytest.raises(IRTypeError, match="do not broadcast"):
        b.op("add", [x, b.input(DType.BF16, [s + 1, 64])])
    with pytest.raises(IRTypeError, match="cannot reshape"):
        b.op("reshape", [x], {"shape": SymList([s, 63])})
    with pytest.raises(IRTypeError, match="cannot prove 0 <= start <= end <= size"):
        b.op("slice", [x], {"dim": 0, "start": SymList([0]), "end": SymList([s + 1])})
    with pytest.raises(IRTypeError, match="unknown op 'frobnicate'"):
        b.op("frobnicate", [x])
    with pytest.raises(IRTypeError, match="linear: operand dtypes differ"):
        b.op("linear", [x, b.input(DType.F32, [16, 64])])


def test_expressions_are_canonical_handles():
    b = GraphBuilder()
    s, t = b.symbol("s0"), b.symbol("s1")
    assert (s + 1) + s == 2 * s + 1
    assert (s + t) * 2 == 2 * t + 2 * s
    assert str(s * t - 2 * s + 3) == "-2*s0 + s0*s1 + 3"
    assert str(s - s) == "0" and (s - s) == 0
    small = b.symbol("k", 0, 15)
    assert str(floordiv(4 * s + 3, 2)) == "2*s0 + 1"
    assert floordiv(small, 16) == 0
    assert mod(8 * s, 4) == 0
    assert str(ceildiv(s, 4)) == "floordiv(s0 + 3, 4)"
    assert sym_max(s, 1) == s and sym_min(s, 1) == 1  # s >= 2
    aligned = b.symbol("a", 0, POS_INF, 16)
    assert mod(aligned, 8) == 0
    assert provably_ge(s, 2) and not provably_ge(s, 3) and provably_ge(s + t, s)
    assert (3 * s + floordiv(t, 2)).evaluate({"s0": 5, "s1": 7}) == 18
    assert (s + t).evaluate({"s0": 5}) is None
    assert s.bounds() == (2, POS_INF) and small.bounds() == (0, 15)
    assert s.is_symbol() and not (s + 1).is_symbol() and (s - s).as_const() == 0


def test_graph_text_and_fb_come_from_the_core():
    b = GraphBuilder("g")
    s = b.symbol("s0")
    x = b.input(DType.F16, [s, 8])
    b.sym_input(s)
    b.output(b.op("sin", [x]))
    g = b.finish()
    assert g.text == (
        "graph @g\nsym s0 in [2, inf] div 1\ninput %0: f16[s0, 8]\n"
        "input %1: sym s0\n%2: f16[s0, 8] = sin(%0)\noutput %2\n"
    )
    assert g.fb[4:8] == b"DGIR"


def test_every_op_of_ops_def_is_known_to_the_builder():
    """The catalog lives in ir/ops.def only; the builder knows every op there by name."""
    names = re.findall(r'DG_OP\(\s*\w+,\s*"(\w+)"', (REPO / "ir" / "ops.def").read_text())
    b = GraphBuilder()
    for name in names:
        try:
            b.op(name, [])
        except IRTypeError as e:
            assert "unknown op" not in str(e), name
