"""The IR as the frontend sees it: a graph built through the core's C API (One IR).

Note [One IR]
The IR's semantics live in C++ only: the op catalog (ir/ops.def), type inference
(ir/shape_infer.cc), the symbolic canonical form (ir/sym_expr.cc), the text form and graph.fb.
GraphBuilder forwards every symbol, input and op to the core's builder (runtime/dyngen.h,
"Building graphs") and reads each node's type back; SymExpr is a handle to an expression the
core canonicalized (arithmetic, bounds, proofs and printing are C calls), so two SymExprs of one
graph are equal exactly when the core's canonical forms are. `Graph.text` and `Graph.fb` are the
core's printer and graph.fb writer. Python keeps only what it needs to call a graph: each input's
type and the symbols, as handles, and the list of nodes as they were forwarded (op name, input
ids, attributes, output id) for the ATen executor (executors/aten_executor.py), which reads
every result's type from the core.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

from . import capi
from .builder_api import lib as _builder_lib
from .ops import DType

NEG_INF = -(2**63)
POS_INF = 2**63 - 1
_MAX_RANK = 8


class IRTypeError(ValueError):
    """An op applied to operands it does not accept (the message is the core's)."""


class SymList(tuple):
    """An attribute holding symbolic integers (shape-like): `sym[s0, 2048]` in the text form."""


AttrValue = int | float | DType | tuple | SymList


def _api():
    return _builder_lib()


def _last_error(lib) -> str:
    return (lib.dg_last_error() or b"").decode(errors="replace")


class _Builder:
    """Owns one dg_builder; every call checks its status (IRTypeError for what the IR refuses)."""

    def __init__(self, name: str, graph_handle=None):
        self.lib = _api()
        p = ctypes.c_void_p()
        if graph_handle is None:
            self._call("dg_builder_new", name.encode(), ctypes.byref(p))
        else:
            self._call("dg_graph_to_builder", graph_handle, ctypes.byref(p))
        self.ptr = p

    def _call(self, fn: str, *args) -> None:
        rc = getattr(self.lib, fn)(*args)
        if rc == 2:  # DG_ERR_INVALID_INPUT: the IR refused the request
            raise IRTypeError(_last_error(self.lib))
        if rc != 0:
            raise RuntimeError(f"{fn} failed (code {rc}): {_last_error(self.lib)}")

    def call(self, fn: str, *args) -> None:
        self._call(fn, self.ptr, *args)

    def out32(self, fn: str, *args) -> int:
        r = ctypes.c_int32()
        self.call(fn, *args, ctypes.byref(r))
        return r.value

    def __del__(self):
        if getattr(self, "ptr", None):
            self.lib.dg_builder_free(self.ptr)
            self.ptr = None


class SymExpr:
    """A symbolic integer expression of one graph: a handle into the core's builder."""

    def __init__(self, builder: _Builder, handle: int):
        self._b, self.h = builder, handle

    def _lift(self, other) -> SymExpr:
        if isinstance(other, SymExpr):
            if other._b is not self._b:
                raise ValueError("expressions of two different graphs")
            return other
        if isinstance(other, bool) or not isinstance(other, int):
            raise TypeError(f"not a symbolic integer: {other!r}")
        return SymExpr(self._b, self._b.out32("dg_builder_const", other))

    def _op(self, op: str, a, b) -> SymExpr:
        a, b = self._lift(a), self._lift(b)
        return SymExpr(self._b, self._b.out32("dg_builder_expr", op.encode(), a.h, b.h))

    def __add__(self, o):
        return self._op("add", self, o)

    def __radd__(self, o):
        return self._op("add", o, self)

    def __sub__(self, o):
        return self._op("sub", self, o)

    def __rsub__(self, o):
        return self._op("sub", o, self)

    def __mul__(self, o):
        return self._op("mul", self, o)

    def __rmul__(self, o):
        return self._op("mul", o, self)

    def __neg__(self):
        return self._op("sub", 0, self)

    def __eq__(self, other):
        if isinstance(other, SymExpr):
            return other._b is self._b and other.h == self.h
        if isinstance(other, int) and not isinstance(other, bool):
            return self.as_const() == other
        return NotImplemented

    def __hash__(self):
        return hash((id(self._b), self.h))

    @functools.cached_property
    def _info(self) -> tuple[int, int, bool, bool]:
        lo, hi, c, s = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int(), ctypes.c_int()
        self._b.call(
            "dg_builder_expr_info",
            self.h,
            ctypes.byref(lo),
            ctypes.byref(hi),
            ctypes.byref(c),
            ctypes.byref(s),
        )
        return lo.value, hi.value, bool(c.value), bool(s.value)

    def bounds(self) -> tuple[int, int]:
        return self._info[0], self._info[1]

    def as_const(self) -> int | None:
        return self._info[0] if self._info[2] else None

    def is_symbol(self) -> bool:
        return self._info[3]

    @property
    def name(self) -> str:
        """A symbol's name (its printed form)."""
        return str(self)

    def evaluate(self, bind: dict[str, int]) -> int | None:
        names = (ctypes.c_char_p * max(len(bind), 1))(*[k.encode() for k in bind])
        values = (ctypes.c_int64 * max(len(bind), 1))(*bind.values())
        out = ctypes.c_int64()
        rc = self._b.lib.dg_builder_expr_eval(
            self._b.ptr, self.h, names, values, len(bind), ctypes.byref(out)
        )
        return out.value if rc == 0 else None

    def __str__(self) -> str:
        p = ctypes.c_void_p()
        self._b.call("dg_builder_expr_str", self.h, ctypes.byref(p))
        s = ctypes.string_at(p).decode()
        self._b.lib.dg_free(p)
        return s

    def __repr__(self) -> str:
        return f"SymExpr({self})"


def _sym_fn(op: str):
    def f(a, b) -> SymExpr:
        x = a if isinstance(a, SymExpr) else b
        if not isinstance(x, SymExpr):
            raise TypeError(f"{op} needs a symbolic operand")
        return x._op(op, a, b)

    f.__name__ = op
    return f


floordiv, mod, ceildiv = _sym_fn("floordiv"), _sym_fn("mod"), _sym_fn("ceildiv")
sym_max, sym_min = _sym_fn("max"), _sym_fn("min")


def provably_ge(a, b) -> bool:
    """a >= b for every value of the symbols, as the core proves it."""
    if not isinstance(a, SymExpr) and not isinstance(b, SymExpr):
        return a >= b
    x = a if isinstance(a, SymExpr) else b
    a, b = x._lift(a), x._lift(b)
    r = ctypes.c_int()
    x._b.call("dg_builder_provably_ge", a.h, b.h, ctypes.byref(r))
    return bool(r.value)


@dataclass(frozen=True)
class TensorType:
    dtype: DType
    shape: tuple  # of SymExpr

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype.text}[{', '.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class Node:
    """One op as GraphBuilder forwarded it to the core; `output` is the value id the core gave."""

    op: str
    inputs: tuple
    attrs: dict
    output: int


@dataclass
class Value:
    type: TensorType | None = None  # tensors
    sym: SymExpr | None = None  # symbolic-integer inputs: the integer the value holds

    @property
    def is_sym(self) -> bool:
        return self.sym is not None


class Graph:
    """A finished graph: the core's dg_graph plus, for calling it, the inputs' types."""

    def __init__(self, builder: GraphBuilder, handle):
        self._builder = builder  # keeps the expression handles alive
        self._handle = handle
        self.name = builder.name
        self.symbols = list(builder.symbols)
        self.values = builder.values
        self.inputs = list(builder.inputs)
        self.outputs = list(builder.outputs)
        # None for a graph the core parsed (GraphBuilder.from_text): its nodes stay in the core.
        self.nodes = None if builder.nodes is None else list(builder.nodes)
        self.symbol_facts = dict(builder.symbol_facts)

    def tensor(self, vid: int) -> TensorType:
        return self._builder.tensor(vid)

    @property
    def handle(self):
        """The core's dg_graph (owned by this Graph; None without outputs): what dg_compile takes,
        so a built graph is compiled without writing and loading graph.fb."""
        return self._handle

    @functools.cached_property
    def text(self) -> str:
        """The core's text form (dg_graph_print)."""
        if self._handle is None:
            return f"# graph @{self.name}: no tensor outputs, nothing to compile\n"
        lib = self._builder.b.lib
        p = ctypes.c_void_p()
        self._builder.b._call("dg_graph_print", self._handle, ctypes.byref(p))
        s = ctypes.string_at(p).decode()
        lib.dg_free(p)
        return s

    def to_text(self) -> str:
        return self.text

    @functools.cached_property
    def fb(self) -> bytes:
        """graph.fb bytes from the core's writer (dg_graph_write_fb); empty without outputs."""
        if self._handle is None:
            return b""
        lib = self._builder.b.lib
        p, n = ctypes.c_void_p(), ctypes.c_size_t()
        self._builder.b._call("dg_graph_write_fb", self._handle, ctypes.byref(p), ctypes.byref(n))
        data = ctypes.string_at(p, n.value)
        lib.dg_free(p)
        return data

    def bind_symbols(self, inputs: list) -> dict[str, int]:
        """Symbol values read off the call's inputs where a dim (or sym input) is a bare symbol
        (the core checks everything else when it runs the graph)."""
        bind: dict[str, int] = {}
        for vid, x in zip(self.inputs, inputs):
            v = self.values[vid]
            pairs = [(v.sym, int(x))] if v.is_sym else list(zip(v.type.shape, x.shape))
            for e, n in pairs:
                if e.is_symbol():
                    bind.setdefault(e.name, int(n))
        return bind

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h:
            self._builder.b.lib.dg_graph_free(h)
            self._handle = None


class GraphBuilder:
    """Builds a graph node by node through the core, which types each result."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.b = _Builder(name)
        self.symbols: list[SymExpr] = []
        self.values: dict[int, Value] = {}
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.nodes: list[Node] | None = []
        self.symbol_facts: dict[str, tuple[int, int, int]] = {}  # name -> (lo, hi, divisor)

    def const(self, v: int) -> SymExpr:
        return SymExpr(self.b, self.b.out32("dg_builder_const", int(v)))

    def sym(self, v) -> SymExpr:
        return v if isinstance(v, SymExpr) else self.const(v)

    def symbol(self, name: str, lo: int = 2, hi: int = POS_INF, divisor: int = 1) -> SymExpr:
        s = SymExpr(self.b, self.b.out32("dg_builder_symbol", name.encode(), lo, hi, divisor))
        self.symbols.append(s)
        self.symbol_facts[name] = (lo, hi, divisor)
        return s

    def input(self, dtype: DType, shape) -> int:
        dims = [self.sym(d).h for d in shape]
        arr = (ctypes.c_int32 * max(len(dims), 1))(*dims)
        vid = self.b.out32("dg_builder_input", dtype.value, arr, len(dims))
        self.values[vid] = Value(type=TensorType(dtype, tuple(self.sym(d) for d in shape)))
        self.inputs.append(vid)
        return vid

    def sym_input(self, value: SymExpr) -> int:
        vid = self.b.out32("dg_builder_sym_input", self.sym(value).h)
        self.values[vid] = Value(sym=self.sym(value))
        self.inputs.append(vid)
        return vid

    def _attr(self, name: str, v: AttrValue) -> None:
        key = name.encode()
        if isinstance(v, bool):
            raise TypeError("bool attributes are not part of the IR; use 0/1")
        if isinstance(v, DType):
            self.b.call("dg_builder_attr_dtype", key, v.value)
        elif isinstance(v, SymList):
            hs = [self.sym(e).h for e in v]
            self.b.call(
                "dg_builder_attr_syms", key, (ctypes.c_int32 * max(len(hs), 1))(*hs), len(hs)
            )
        elif isinstance(v, (tuple, list)):
            self.b.call(
                "dg_builder_attr_ints",
                key,
                (ctypes.c_int64 * max(len(v), 1))(*[int(i) for i in v]),
                len(v),
            )
        elif isinstance(v, int):
            self.b.call("dg_builder_attr_int", key, v)
        elif isinstance(v, float):
            self.b.call("dg_builder_attr_float", key, v)
        else:
            raise TypeError(f"not an attribute value: {v!r}")

    def op(self, op: str, inputs, attrs: dict | None = None) -> int:
        for k, v in (attrs or {}).items():
            self._attr(k, v)
        ids = [int(i) for i in inputs]
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        vid = self.b.out32("dg_builder_op", op.encode(), arr, len(ids))
        if self.nodes is not None:
            self.nodes.append(Node(op, tuple(ids), dict(attrs or {}), vid))
        return vid

    def tensor(self, vid: int) -> TensorType:
        """The type the core gave value `vid`."""
        v = self.values.get(vid)
        if v is not None and v.type is not None:
            return v.type
        dtype, rank = ctypes.c_int32(), ctypes.c_int32()
        dims = (ctypes.c_int32 * _MAX_RANK)()
        self.b.call("dg_builder_value_type", vid, ctypes.byref(dtype), ctypes.byref(rank), dims)
        if rank.value < 0:
            raise TypeError(f"%{vid} is not a tensor")
        shape = tuple(SymExpr(self.b, dims[d]) for d in range(rank.value))
        t = TensorType(DType(dtype.value), shape)
        self.values[vid] = Value(type=t)
        return t

    def output(self, vid: int) -> None:
        self.b.call("dg_builder_output", vid)
        self.outputs.append(vid)

    def finish(self) -> Graph:
        """The finished graph. A graph without tensor outputs (a backward whose gradients are all
        None, constants or inputs) has nothing to compute: it gets no core graph (the core
        refuses one without outputs) and its callers run no GraphRunner for it."""
        if not self.outputs:
            return Graph(self, None)
        p = ctypes.c_void_p()
        self.b.call("dg_builder_finish", ctypes.byref(p))
        return Graph(self, p)

    def num_nodes(self) -> int:
        n = ctypes.c_int()
        self.b.call("dg_builder_num_nodes", ctypes.byref(n))
        return n.value

    @staticmethod
    def from_text(text: str) -> GraphBuilder:
        """A builder holding a graph given in the text form, parsed and typed by the core (its
        symbols, inputs and their types readable as for a graph built here)."""
        handle = capi.load_graph(text)
        try:
            gb = GraphBuilder.__new__(GraphBuilder)
            gb.b = _Builder("", graph_handle=handle)
        finally:
            gb.b.lib.dg_graph_free(handle)
        gb.name, gb.values, gb.outputs, gb.nodes, gb.symbol_facts = "", {}, [], None, {}
        for fn, dest in (("dg_builder_symbols", "symbols"), ("dg_builder_inputs", "inputs")):
            n = ctypes.c_int()
            gb.b.call(fn, None, 0, ctypes.byref(n))
            arr = (ctypes.c_int32 * max(n.value, 1))()
            gb.b.call(fn, arr, n.value, ctypes.byref(n))
            setattr(gb, dest, list(arr[: n.value]))
        gb.symbols = [SymExpr(gb.b, h) for h in gb.symbols]
        for vid in gb.inputs:
            dtype, rank = ctypes.c_int32(), ctypes.c_int32()
            dims = (ctypes.c_int32 * _MAX_RANK)()
            gb.b.call("dg_builder_value_type", vid, ctypes.byref(dtype), ctypes.byref(rank), dims)
            gb.values[vid] = (
                Value(sym=SymExpr(gb.b, dims[0]))
                if rank.value < 0
                else Value(
                    type=TensorType(
                        DType(dtype.value), tuple(SymExpr(gb.b, dims[d]) for d in range(rank.value))
                    )
                )
            )
        return gb
