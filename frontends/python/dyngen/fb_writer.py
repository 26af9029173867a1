"""The in-Python IR -> graph.fb bytes (ir/graph.fbs), with the flatc-generated code in `_fb`.

Note [Python graph.fb writer]
This mirrors ir/fb_writer.cc, so that the core reads back exactly the graph the frontend built:
  * The expression table holds every distinct interned SymExpr node once, emitted depth first,
    so operands always point to EARLIER entries (the loader rejects anything else). A sum's
    scaled term c*m (c != 1) is its own entry Product(Const c, m); a sum's nonzero constant is a
    trailing Const operand. The loader re-canonicalizes (acc + x, acc * x, floordiv, ...), and
    because the Python nodes are the C++ canonical form (Note [SymExpr mirror]), the rebuilt
    expressions are the ones the frontend printed.
  * Symbols are matched by node identity (name and facts), as the C++ writer does; an
    expression that uses an undeclared symbol is refused here instead of by the loader.
  * Value ids are written as they are (the IR's own numbering); printing renumbers canonically.
  * A float attribute is always written, also when it is 0.0: FlatBuffers drops a field equal to
    its default, and -0.0 == 0.0 would silently turn -0.0 into +0.0.
The text form (ir.print_graph) stays the debugging format; DYNGEN_DUMP writes both.
"""
from __future__ import annotations

import flatbuffers

from ._fb import Attr as fb_attr
from ._fb import Expr as fb_expr
from ._fb import Graph as fb_graph
from ._fb import Node as fb_node
from ._fb import Symbol as fb_symbol
from ._fb import Value as fb_value
from ._fb.AttrKind import AttrKind
from ._fb.ExprKind import ExprKind
from ._fb.ValueKind import ValueKind
from .ir import Graph, SymList
from .ops import OPS, DType
from .symbolic import (CONST, FLOORDIV, MAX, MIN, MOD, NEG_INF, POS_INF, PRODUCT, SUM, SYMBOL,
                       SymExpr, _const)

# The schema revision this writer produces (kGraphFbVersion in ir/fb_loader.h; a test checks).
SCHEMA_VERSION = 1
FILE_IDENTIFIER = b"DGIR"

_FN_KIND = {FLOORDIV: ExprKind.FloorDiv, MOD: ExprKind.Mod, MAX: ExprKind.Max, MIN: ExprKind.Min}


class FbWriteError(ValueError):
    """The graph cannot be written (an undeclared symbol, an unknown op or attribute value)."""


class _ExprTable:
    """Note [Python graph.fb writer]: one entry per distinct node, operands first."""

    def __init__(self, symbols: list[SymExpr]):
        self._symbol_index = {}
        for i, s in enumerate(symbols):
            if not s.is_symbol():
                raise FbWriteError(f"declared symbol {s} is not a symbol")
            self._symbol_index[id(s.node)] = i
        self._symbols = symbols  # keeps the nodes alive while ids are used as keys
        self._index: dict[int, int] = {}
        self._term_index: dict[tuple[int, int], int] = {}
        self.entries: list[tuple[int, int, int, list[int]]] = []  # kind, value, symbol, operands

    def index(self, e: SymExpr) -> int:
        return self._emit(e.node)

    def _add(self, kind, value=0, symbol=0, operands=()) -> int:
        self.entries.append((kind, value, symbol, list(operands)))
        return len(self.entries) - 1

    def _emit(self, n) -> int:
        i = self._index.get(id(n))
        if i is not None:
            return i
        k = n.kind
        if k == CONST:
            i = self._add(ExprKind.Const, value=n.value)
        elif k == SYMBOL:
            s = self._symbol_index.get(id(n))
            if s is None:
                raise FbWriteError(f"symbol {n.name} is used but not declared (with these facts)")
            i = self._add(ExprKind.Symbol, symbol=s)
        elif k == SUM:
            ops = [self._emit_term(c, m) for c, m in n.terms]
            if n.value != 0:
                ops.append(self._emit(_const(n.value)))
            i = self._add(ExprKind.Sum, operands=ops)
        elif k == PRODUCT:
            i = self._add(ExprKind.Product, operands=[self._emit(f) for f in n.factors])
        else:
            i = self._add(_FN_KIND[k], operands=[self._emit(n.lhs), self._emit(n.rhs)])
        self._index[id(n)] = i
        return i

    def _emit_term(self, coef: int, mono) -> int:
        if coef == 1:
            return self._emit(mono)
        key = (coef, id(mono))
        i = self._term_index.get(key)
        if i is None:
            c = self._emit(_const(coef))
            i = self._add(ExprKind.Product, operands=[c, self._emit(mono)])
            self._term_index[key] = i
        return i


def _scalars(b: flatbuffers.Builder, xs, width: int, prepend) -> int:
    """A vector of `width`-byte scalars; `prepend` is the builder's Prepend* for their type."""
    xs = list(xs)
    b.StartVector(width, len(xs), width)
    for x in reversed(xs):
        prepend(x)
    return b.EndVector()


def _uints(b: flatbuffers.Builder, xs) -> int:
    return _scalars(b, xs, 4, b.PrependUint32)


def _longs(b: flatbuffers.Builder, xs) -> int:
    return _scalars(b, xs, 8, b.PrependInt64)


def _offsets(b: flatbuffers.Builder, offs: list[int]) -> int:
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _attr(b: flatbuffers.Builder, exprs: _ExprTable, name: str, v) -> int:
    name_off = b.CreateString(name)
    vec = None
    if isinstance(v, SymList):
        vec = _uints(b, [exprs.index(e if isinstance(e, SymExpr) else SymExpr(e)) for e in v])
    elif isinstance(v, tuple):
        vec = _longs(b, [int(i) for i in v])
    fb_attr.Start(b)
    fb_attr.AddName(b, name_off)
    if isinstance(v, DType):
        fb_attr.AddKind(b, AttrKind.Dtype)
        fb_attr.AddDtype(b, v.value)
    elif isinstance(v, SymList):
        fb_attr.AddKind(b, AttrKind.Exprs)
        fb_attr.AddExprs(b, vec)
    elif isinstance(v, tuple):
        fb_attr.AddKind(b, AttrKind.Ints)
        fb_attr.AddInts(b, vec)
    elif isinstance(v, bool):
        raise FbWriteError(f"attribute {name}: bool attributes are not part of the IR; use 0/1")
    elif isinstance(v, int):
        fb_attr.AddKind(b, AttrKind.Int)
        fb_attr.AddI(b, v)
    elif isinstance(v, float):
        fb_attr.AddKind(b, AttrKind.Float)
        b.PrependFloat64(v)  # always present (Note [Python graph.fb writer]: -0.0)
        b.Slot(3)
    else:
        raise FbWriteError(f"attribute {name}: not an attribute value: {v!r}")
    return fb_attr.End(b)


def write_graph_fb(g: Graph) -> bytes:
    """graph.fb bytes for `g` (Note [Python graph.fb writer]); raises FbWriteError."""
    b = flatbuffers.Builder(4096)
    exprs = _ExprTable(g.symbols)

    symbols = []
    for s in g.symbols:
        lo, hi = s.range
        name = b.CreateString(s.name)
        fb_symbol.Start(b)
        fb_symbol.AddName(b, name)
        if lo == NEG_INF:
            fb_symbol.AddLoUnbounded(b, True)
        else:
            fb_symbol.AddLo(b, lo)
        if hi == POS_INF:
            fb_symbol.AddHiUnbounded(b, True)
        else:
            fb_symbol.AddHi(b, hi)
        fb_symbol.AddDivisor(b, s.symbol_divisor)
        symbols.append(fb_symbol.End(b))

    values = []
    for vid, v in enumerate(g.values):
        if v.is_sym:
            sym = exprs.index(v.sym)
            fb_value.Start(b)
            fb_value.AddKind(b, ValueKind.SymInt)
            fb_value.AddSymValue(b, sym)
        else:
            if v.type is None:
                raise FbWriteError(f"value %{vid} has no type")
            shape = _uints(b, [exprs.index(d) for d in v.type.shape])
            fb_value.Start(b)
            fb_value.AddKind(b, ValueKind.Tensor)
            fb_value.AddDtype(b, v.type.dtype.value)
            fb_value.AddShape(b, shape)
        values.append(fb_value.End(b))

    nodes = []
    for n in g.nodes:
        info = OPS.get(n.op)
        if info is None:
            raise FbWriteError(f"unknown op {n.op}")
        attrs = [_attr(b, exprs, k, v) for k, v in n.attrs.items()]
        inputs = _uints(b, n.inputs)
        attr_vec = _offsets(b, attrs) if attrs else None
        fb_node.Start(b)
        fb_node.AddOp(b, info.code)
        fb_node.AddInputs(b, inputs)
        fb_node.AddOutput(b, n.output)
        if attr_vec is not None:
            fb_node.AddAttrs(b, attr_vec)
        nodes.append(fb_node.End(b))

    expr_offsets = []
    for kind, value, symbol, operands in exprs.entries:
        ops = _uints(b, operands) if operands else None
        fb_expr.Start(b)
        fb_expr.AddKind(b, kind)
        fb_expr.AddValue(b, value)
        fb_expr.AddSymbol(b, symbol)
        if ops is not None:
            fb_expr.AddOperands(b, ops)
        expr_offsets.append(fb_expr.End(b))

    name = b.CreateString(g.name or "graph")
    symbols_vec = _offsets(b, symbols)
    exprs_vec = _offsets(b, expr_offsets)
    values_vec = _offsets(b, values)
    inputs_vec = _uints(b, g.inputs)
    outputs_vec = _uints(b, g.outputs)
    nodes_vec = _offsets(b, nodes)
    fb_graph.Start(b)
    fb_graph.AddVersion(b, SCHEMA_VERSION)
    fb_graph.AddName(b, name)
    fb_graph.AddSymbols(b, symbols_vec)
    fb_graph.AddExprs(b, exprs_vec)
    fb_graph.AddValues(b, values_vec)
    fb_graph.AddInputs(b, inputs_vec)
    fb_graph.AddOutputs(b, outputs_vec)
    fb_graph.AddNodes(b, nodes_vec)
    b.Finish(fb_graph.End(b), file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())
