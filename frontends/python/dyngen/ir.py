"""The in-Python dyngen IR: a mirror of ir/graph.h with its builder and the text printer.

A Graph holds declared symbols (with facts), SSA values (tensors or symbolic integers), nodes in
topological order, inputs and outputs. GraphBuilder types every node with the C++ typing rules
(dyngen/shape_infer.py mirrors ir/shape_infer.cc), so a graph the frontend builds is one the C++
verifier accepts. `Graph.to_text()` prints Note [IR text form] of ir/text_format.h exactly as
`dg::print_graph` does (see Note [SymExpr mirror] in symbolic.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from .ops import DType
from .symbolic import POS_INF, SymExpr, bound_str


class SymList(tuple):
    """An attribute holding symbolic integers (shape-like): printed `sym[s0, 2048]`."""


# An attribute value: int, float, DType, tuple of ints (axes) or SymList (shape-like).
AttrValue = Union[int, float, DType, tuple, SymList]


@dataclass(frozen=True)
class TensorType:
    dtype: DType
    shape: tuple  # of SymExpr

    @property
    def rank(self) -> int:
        return len(self.shape)

    def numel(self) -> SymExpr:
        n = SymExpr(1)
        for d in self.shape:
            n = n * d
        return n

    def __str__(self) -> str:
        return f"{self.dtype.text}[{', '.join(str(d) for d in self.shape)}]"


@dataclass
class Value:
    type: TensorType | None = None  # tensors
    sym: SymExpr | None = None      # symbolic-integer inputs: the integer the value holds
    producer: int = -1              # index of the producing node; -1 for graph inputs

    @property
    def is_sym(self) -> bool:
        return self.sym is not None


@dataclass
class Node:
    op: str
    inputs: list[int]
    attrs: dict[str, AttrValue]
    output: int


@dataclass
class Graph:
    name: str = "graph"
    symbols: list[SymExpr] = field(default_factory=list)
    values: list[Value] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    def tensor(self, vid: int) -> TensorType:
        t = self.values[vid].type
        if t is None:
            raise TypeError(f"%{vid} is not a tensor")
        return t

    def to_text(self) -> str:
        return print_graph(self)


class IRTypeError(ValueError):
    """An op applied to operands it does not accept (the message is the C++ one)."""


class GraphBuilder:
    """Builds a graph node by node, typing each result like dg::GraphBuilder."""

    def __init__(self, name: str = "graph"):
        self.graph = Graph(name=name)

    def symbol(self, name: str, lo: int = 2, hi: int = POS_INF, divisor: int = 1) -> SymExpr:
        s = SymExpr.symbol(name, lo, hi, divisor)
        self.graph.symbols.append(s)
        return s

    def input(self, dtype: DType, shape) -> int:
        shape = tuple(d if isinstance(d, SymExpr) else SymExpr(d) for d in shape)
        return self._add_input(Value(type=TensorType(dtype, shape)))

    def sym_input(self, value: SymExpr) -> int:
        return self._add_input(Value(sym=value))

    def _add_input(self, v: Value) -> int:
        self.graph.values.append(v)
        vid = len(self.graph.values) - 1
        self.graph.inputs.append(vid)
        return vid

    def op(self, op: str, inputs, attrs: dict | None = None) -> int:
        from .shape_infer import infer_type

        g = self.graph
        inputs = list(inputs)
        attrs = dict(sorted((attrs or {}).items()))  # entries sorted by name, as dg::Attrs
        for i in inputs:
            if not 0 <= i < len(g.values):
                raise IRTypeError(f"{op}: operand id out of range")
        out_type = infer_type(g, op, inputs, attrs)
        g.values.append(Value(type=out_type, producer=len(g.nodes)))
        vid = len(g.values) - 1
        g.nodes.append(Node(op, inputs, attrs, vid))
        return vid

    def output(self, vid: int) -> None:
        self.graph.outputs.append(vid)

    def finish(self) -> Graph:
        return self.graph


# ---- printing (dg::print_graph) -----------------------------------------------------------------

def print_float(v: float) -> str:
    """The shortest %g form that parses back to v, always marked as a float (text_printer.cc)."""
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    s = "%.17g" % v
    for prec in range(1, 17):
        t = "%.*g" % (prec, v)
        if float(t) == v:
            s = t
            break
    if not any(c in s for c in ".en"):
        s += ".0"
    return s


def print_attr_value(v: AttrValue) -> str:
    if isinstance(v, DType):
        return v.text
    if isinstance(v, SymList):
        return "sym[" + ", ".join(str(e) for e in v) + "]"
    if isinstance(v, tuple):
        return "[" + ", ".join(str(int(i)) for i in v) + "]"
    if isinstance(v, bool):
        raise TypeError("bool attributes are not part of the IR; use 0/1")
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return print_float(v)
    raise TypeError(f"not an attribute value: {v!r}")


def print_graph(g: Graph) -> str:
    number: dict[int, int] = {}

    def name(vid: int) -> str:
        return f"%{number[vid]}" if vid in number else f"%?{vid}"

    out = [f"graph @{g.name or 'graph'}"]
    for s in g.symbols:
        lo, hi = s.range
        out.append(f"sym {s.name} in [{bound_str(lo)}, {bound_str(hi)}] div {s.symbol_divisor}")
    for vid in g.inputs:
        number[vid] = len(number)
        v = g.values[vid]
        out.append(f"input {name(vid)}: " + (f"sym {v.sym}" if v.is_sym else str(v.type)))
    for n in g.nodes:
        number[n.output] = len(number)
        line = f"{name(n.output)}: {g.tensor(n.output)} = {n.op}(" + ", ".join(
            name(i) for i in n.inputs) + ")"
        if n.attrs:
            attrs = ", ".join(f"{k} = {print_attr_value(v)}" for k, v in n.attrs.items())
            line += " {" + attrs + "}"
        out.append(line)
    out.append("output " + ", ".join(name(o) for o in g.outputs))
    return "\n".join(out) + "\n"
