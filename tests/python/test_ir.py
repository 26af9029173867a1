"""The Python IR mirrors the C++ one: catalog, dtypes, typing rules, text form."""
import re

import pytest

from conftest import REPO
from dyngen.ir import GraphBuilder, IRTypeError, SymList, print_float
from dyngen.ops import OPS, DType
from dyngen.symbolic import SymExpr
from dyngen.text import ParseError, parse_graph_text


def test_catalog_matches_ops_def():
    text = (REPO / "ir" / "ops.def").read_text()
    rows = re.findall(r'DG_OP\(\s*\w+,\s*"(\w+)",\s*(\d+),\s*(\w+),\s*(-?\d+),\s*(-?\d+)\)', text)
    assert rows, "no DG_OP lines found"
    assert {r[0] for r in rows} == set(OPS), "ops.def and dyngen/ops.py list different ops"
    for name, code, cat, lo, hi in rows:
        o = OPS[name]
        assert (o.code, o.category.value, o.min_inputs, o.max_inputs) == (int(code), cat, int(lo),
                                                                          int(hi)), name


def test_dtypes_match_dtype_h():
    text = (REPO / "ir" / "dtype.h").read_text()
    rows = re.findall(r'X\(k\w+,\s*(\d+),\s*"(\w+)",\s*(\d+),\s*(true|false)\)', text)
    assert len(rows) == len(DType)
    for code, name, size, is_float in rows:
        d = DType(int(code))
        assert (d.text, d.itemsize, d.is_float) == (name, int(size), is_float == "true")


SEED = """\
graph @expert_mlp
sym s0 in [2, inf] div 1
input %0: bf16[s0, 2048]
input %1: bf16[1024, 2048]
input %2: f32[16, 2048]
input %3: sym s0
%4: bf16[s0, 1024] = linear(%0, %1)
%5: f32[s0, 2048] = cast(%0) {dtype = f32}
%6: f32[s0, 16] = linear(%5, %2)
%7: f32[] = constant() {dtype = f32, value = 2.0}
%8: f32[s0, 16] = mul(%6, %7)
%9: f32[2*s0, 8] = reshape(%8) {shape = sym[2*s0, 8]}
%10: f32[s0, 16] = full() {dtype = f32, shape = sym[s0, 16], value = -1e-05}
%11: f32[floordiv(s0 + 1, 2), 16] = slice(%10) {dim = 0, end = sym[s0], start = sym[0], step = 2}
%12: f32[16] = sum(%6) {dims = [0], keepdim = 0}
%13: f32[3*s0, 16] = cat(%10, %10, %10) {dim = 0}
output %4, %9, %11, %12
"""


def test_text_round_trip_and_typing():
    g = parse_graph_text(SEED)
    assert g.to_text() == SEED
    assert parse_graph_text(g.to_text()).to_text() == SEED
    for wrong in ("%9: bf16[2*s0, 8] = reshape", "%13: f32[s0 + 2, 16] = cat"):
        bad = SEED.replace(wrong.replace("bf16", "f32").replace("s0 + 2", "3*s0"), wrong)
        with pytest.raises(ParseError, match="declared type"):
            parse_graph_text(bad)


@pytest.mark.parametrize("line,message", [
    ("%5: f32[s0, 16] = linear(%0, %2)", "linear: operand dtypes differ"),
    ("%5: bf16[s0, 16] = silu(%3)", "not a tensor"),
    ("%5: bf16[s0, 16] = frobnicate(%0)", "unknown op frobnicate"),
    ("%5: bf16[s1] = neg(%0)", "undeclared symbol 's1'"),
    ("%5: bf16[s0, 2048] = neg(%9)", "%9 is used before it is defined"),
])
def test_parse_errors_name_the_line(line, message):
    head = "\n".join(SEED.splitlines()[:6])
    with pytest.raises(ParseError) as e:
        parse_graph_text(head + "\n" + line + "\noutput %0\n")
    assert "line 7" in str(e.value) and message in str(e.value)


def test_builder_typing_rules():
    b = GraphBuilder()
    s = b.symbol("s0")
    x = b.input(DType.BF16, [s, 64])
    c = b.op("constant", [], {"dtype": DType.F32, "value": 2.0})
    assert b.graph.tensor(b.op("mul", [x, c])).dtype == DType.BF16  # rank-0: no promotion
    y = b.input(DType.F32, [s, 64])
    assert b.graph.tensor(b.op("add", [x, y])).dtype == DType.F32
    i = b.input(DType.I64, [s])
    assert str(b.graph.tensor(b.op("index_select", [x, i], {"dim": 0}))) == "bf16[s0, 64]"
    with pytest.raises(IRTypeError, match="do not broadcast"):
        b.op("add", [x, b.input(DType.BF16, [s + 1, 64])])
    with pytest.raises(IRTypeError, match="cannot reshape"):
        b.op("reshape", [x], {"shape": SymList([s, 63])})
    with pytest.raises(IRTypeError, match="cannot prove 0 <= start <= end <= size"):
        b.op("slice", [x], {"dim": 0, "start": SymList([SymExpr(0)]), "end": SymList([s + 1])})


@pytest.mark.parametrize("v,text", [(2.0, "2.0"), (0.1, "0.1"), (1e-05, "1e-05"), (-0.0, "-0.0"),
                                    (1e16, "1e+16"), (123456789.0, "123456789.0"),
                                    (float("inf"), "inf"), (float("-inf"), "-inf")])
def test_print_float_like_the_core(v, text):
    assert print_float(v) == text
