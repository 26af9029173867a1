"""FX GraphModule (Dynamo torch-level or AOTAutograd ATen-level) -> dyngen IR.

Every placeholder and node carries FakeTensor / SymInt metadata (`meta['val']` in ATen graphs,
`meta['example_value']` in Dynamo graphs). Symbolic dims stay symbolic: each SymInt's sympy
expression becomes an IR SymExpr, with the sympy symbols renamed s0, s1, ... in order of first
appearance among the inputs and their facts taken from the ShapeEnv (Dynamo: [2, inf]).

Note [Export checks every node against PyTorch]
Each IR node is typed by the core as it is built (Note [One IR] in core/ir.py). The exporter
compares that type to the node's FakeTensor (dtype and every dim) and raises ExportError on any
difference, so an IR graph that exports is one whose typing agrees with PyTorch's, op by op.

Note [Export outputs]
IR outputs are tensors only. An FX output may also be None, a Python number, a SymInt (AOTAutograd
saves sizes for the backward) or a graph input returned as is; `Exported.outputs` says for each
flattened FX output where its value comes from, and `out_spec` rebuilds the FX structure.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch.utils import _pytree as pytree

from ..core.ir import (
    NEG_INF,
    POS_INF,
    Graph,
    GraphBuilder,
    SymExpr,
    TensorType,
    ceildiv,
    floordiv,
    mod,
    sym_max,
    sym_min,
)
from ..core.ops import DType
from ..errors import ExportError, Unsupported
from .node_to_ir import node_to_ir
from .sym_ops import SymBool
from .values import Ref, dtype_of, meta_val


@dataclass
class InputSpec:
    kind: str  # "placeholder": FX argument `index`; "attr": a tensor held by the module
    index: int = -1
    tensor: torch.Tensor | None = None


@dataclass
class OutputSpec:
    kind: str  # "ir" (IR output `index`), "input" (FX argument `index`, returned as is),
    index: int = -1  # "input_copy" (a copy of FX argument `index`), "sym", "const"
    sym: SymExpr | None = None
    value: Any = None


@dataclass
class Exported:
    graph: Graph
    inputs: list[InputSpec]  # one per IR input, in IR input order
    outputs: list[OutputSpec]  # one per flattened FX output
    out_spec: Any  # pytree spec of the FX output
    num_placeholders: int
    symbol_names: dict[str, str] = field(default_factory=dict)  # IR name -> sympy name

    @property
    def text(self) -> str:
        """The IR text form, printed by the core (debugging, dumps)."""
        return self.graph.text

    @property
    def fb(self) -> bytes:
        """graph.fb bytes, written by the core (Note [One IR] in core/ir.py)."""
        return self.graph.fb

    @functools.cached_property
    def key(self) -> str:
        """A hash of the text form (the Python-side cache key; the core hashes canonically)."""
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass
class SymbolChoices:
    """What pinned.py decides for an export (Note [Pinned symbols] in pinned.py): sympy symbols
    fixed to an int (`pins`) or replaced by an expression of other symbols (`subst`, from
    Dynamo's equality guards)."""

    pins: dict = field(default_factory=dict)
    subst: dict = field(default_factory=dict)
    ranges: dict = field(default_factory=dict)  # symbol -> (lo or None, hi or None), narrowing


def export(
    gm: torch.fx.GraphModule,
    example_inputs=None,
    name: str = "graph",
    choices: SymbolChoices | None = None,
) -> Exported:
    """Exports `gm` to the dyngen IR; raises Unsupported naming the first op it cannot take."""
    return _Exporter(gm, example_inputs, name, choices).run()


def unsupported_reason(node: torch.fx.Node) -> str | None:
    """Whether the exporter can take this one FX node: None if it can, else the reason (naming
    the op). The node is translated on its own in a scratch exporter whose inputs are the node's
    operands, typed from their FakeTensor metadata, so every check of the real export (handler
    arguments, IR typing, Note [Export checks every node against PyTorch]) applies. What the
    check cannot see is the graph around the node: whether its symbols are bindable
    (_check_bindable) is a property of the whole region, checked when the region is exported."""
    try:
        _Exporter(None, None, "probe").probe(node)
    except Unsupported as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - anything unexpected is a reason not to take it
        return f"op {node.target}: {type(e).__name__}: {e}"
    return None


class _Exporter:
    def __init__(self, gm, example_inputs, name, choices: SymbolChoices | None = None):
        self.gm = gm
        self.choices = choices or SymbolChoices()
        self.example_inputs = list(example_inputs) if example_inputs is not None else None
        self.b = GraphBuilder(name)
        self.env: dict[torch.fx.Node, Any] = {}
        self.inputs: list[InputSpec] = []
        self.sym_of: dict[Any, SymExpr] = {}  # sympy symbol -> IR symbol
        self.sym_names: dict[str, str] = {}
        self.placeholder_vid: dict[int, int] = {}  # IR value id -> FX placeholder index

    # -- symbols ------------------------------------------------------------------------------

    def _declare(self, s, shape_env) -> None:
        if s in self.sym_of or s in self.choices.pins:
            return
        if s in self.choices.subst:
            for t in sorted(self.choices.subst[s].free_symbols, key=str):
                self._declare(t, shape_env)
            return
        lo, hi = 2, POS_INF
        if shape_env is not None and s in getattr(shape_env, "var_to_range", {}):
            vr = shape_env.var_to_range[s]
            lo = _bound(vr.lower, NEG_INF)
            hi = _bound(vr.upper, POS_INF)
        narrow_lo, narrow_hi = self.choices.ranges.get(s, (None, None))
        lo = lo if narrow_lo is None else max(lo, narrow_lo)
        hi = hi if narrow_hi is None else min(hi, narrow_hi)
        name = f"s{len(self.sym_of)}"
        self.sym_of[s] = self.b.symbol(name, lo, hi, 1)
        self.sym_names[name] = str(s)

    def _declare_from(self, v) -> None:
        for s in _symints(v):
            node = s.node
            for sym in sorted(node.expr.free_symbols, key=str):
                self._declare(sym, getattr(node, "shape_env", None))

    def sym(self, v) -> SymExpr:
        """An int, SymInt or sympy expression -> SymExpr."""
        if isinstance(v, bool):
            raise Unsupported("a bool where an integer is expected")
        if isinstance(v, int):
            return self.b.const(v)
        if isinstance(v, SymExpr):
            return v
        if isinstance(v, torch.SymInt):
            return self._from_sympy(v.node.expr)
        raise Unsupported(f"symbolic value {v!r} of type {type(v).__name__}")

    def _from_sympy(self, e) -> SymExpr:
        import sympy

        if e.is_Integer:
            return self.b.const(int(e))
        if e.is_Symbol:
            if e in self.choices.pins:
                return self.b.const(int(self.choices.pins[e]))
            if e in self.choices.subst:
                return self._from_sympy(self.choices.subst[e])
            if e not in self.sym_of:
                raise Unsupported(
                    f"symbol {e} is not bound by any graph input (a data-dependent size)"
                )
            return self.sym_of[e]
        cls = type(e).__name__
        args = [self._from_sympy(a) for a in e.args] if cls != "Pow" else None
        if isinstance(e, sympy.Add):
            r = self.b.const(0)
            for a in args:
                r = r + a
            return r
        if isinstance(e, sympy.Mul):
            r = self.b.const(1)
            for a in args:
                r = r * a
            return r
        if isinstance(e, sympy.Pow):
            base, exp = e.args
            if not (exp.is_Integer and int(exp) >= 0):
                raise Unsupported(f"symbolic expression {e}")
            r, x = self.b.const(1), self._from_sympy(base)
            for _ in range(int(exp)):
                r = r * x
            return r
        fns = {
            "FloorDiv": floordiv,
            "PythonMod": mod,
            "Mod": mod,
            "CeilDiv": ceildiv,
            "Max": sym_max,
            "Min": sym_min,
        }
        if cls in fns and len(args) >= 2:
            r = fns[cls](args[0], args[1])
            for a in args[2:]:
                r = fns[cls](r, a)
            return r
        raise Unsupported(f"symbolic expression {e} ({cls})")

    _RELATIONS = {
        "StrictGreaterThan": "gt",
        "GreaterThan": "ge",
        "StrictLessThan": "lt",
        "LessThan": "le",
        "Equality": "eq",
        "Unequality": "ne",
    }

    def _symbool_from_sympy(self, e) -> SymBool:
        op = self._RELATIONS.get(type(e).__name__)
        if op is None:
            raise Unsupported(f"symbolic boolean {e}")
        return SymBool(op, self._from_sympy(e.lhs), self._from_sympy(e.rhs))

    def shape(self, v) -> tuple:
        return tuple(self.sym(d) for d in v.shape)

    # -- the walk -------------------------------------------------------------------------------

    def run(self) -> Exported:

        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        vals = []
        for i, n in enumerate(placeholders):
            v = meta_val(n)
            if v is None and self.example_inputs is not None and i < len(self.example_inputs):
                v = self.example_inputs[i]
            vals.append(v)
            self._declare_from(v)
        for i, (n, v) in enumerate(zip(placeholders, vals)):
            if isinstance(v, torch.Tensor):
                vid = self.b.input(dtype_of(v.dtype, f"input {n.name}"), self.shape(v))
                self.inputs.append(InputSpec("placeholder", i))
                self.placeholder_vid[vid] = i
                self.env[n] = Ref(vid)
            elif isinstance(v, torch.SymInt):
                e = self.sym(v)
                if not e.is_symbol() and (self.choices.pins or self.choices.subst):
                    # pinned or replaced (SymbolChoices): a value of the graph, not an argument
                    self.env[n] = e.as_const() if e.as_const() is not None else e
                    continue
                self.b.sym_input(e)
                self.inputs.append(InputSpec("placeholder", i))
                self.env[n] = e
            elif v is None or isinstance(v, (int, float, bool)):
                self.env[n] = v  # specialized by Dynamo's guards: a constant of this graph
            else:
                raise Unsupported(f"input {n.name} of type {type(v).__name__}")

        self._check_bindable()
        out_node = None
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                continue
            if n.op == "output":
                out_node = n
                break
            if n.op == "get_attr":
                self.env[n] = self._get_attr(n)
                continue
            if n.op == "call_module":
                raise Unsupported(f"op call_module ({n.target})")
            result = node_to_ir(self, n)
            self.env[n] = result
            self._check(n, result)
        return self._outputs(out_node, placeholders)

    def probe(self, node: torch.fx.Node) -> None:
        """Translates `node` alone (unsupported_reason): its operands become inputs of a scratch
        graph; raises Unsupported or ExportError where the real export would."""

        if node.op in ("placeholder", "get_attr", "output"):
            v = meta_val(node)
            for leaf in pytree.tree_flatten(v)[0]:
                if isinstance(leaf, torch.Tensor):
                    dtype_of(leaf.dtype, f"{node.op} {node.name}")
            return
        if node.op == "call_module":
            raise Unsupported(f"op call_module ({node.target})")
        operands = list(node.all_input_nodes)
        for a in operands:
            self._declare_from_tree(meta_val(a))
        self._declare_from_tree(meta_val(node))
        for a in operands:
            self.env[a] = self._probe_operand(a, meta_val(a))
        self.env[node] = node_to_ir(self, node)
        self._check(node, self.env[node])

    def _declare_from_tree(self, v) -> None:
        for leaf in pytree.tree_flatten(v)[0]:
            self._declare_from(leaf)

    def _probe_operand(self, a: torch.fx.Node, v):
        if isinstance(v, torch.SymBool):
            return self._symbool_from_sympy(v.node.expr)
        if isinstance(v, torch.Tensor):
            return Ref(self.b.input(dtype_of(v.dtype, f"operand {a.name}"), self.shape(v)))
        if isinstance(v, torch.SymInt):
            return self.sym(v)
        if isinstance(v, (tuple, list)):
            return type(v)(self._probe_operand(a, x) for x in v)
        return v

    def _check_bindable(self) -> None:
        """Every symbol must be a whole input dim or a sym input somewhere: that is where a call
        binds it (Graph.bind_symbols in core/ir.py, dg_prepare in the core)."""
        g = self.b
        whole = set()
        for vid in g.inputs:
            v = g.values[vid]
            for e in [v.sym] if v.is_sym else list(v.type.shape):
                if e.is_symbol():
                    whole.add(e.name)
        for s in g.symbols:
            if s.name not in whole:
                raise Unsupported(
                    f"symbol {s.name} ({self.sym_names[s.name]}) appears only inside "
                    "compound input dims; a call could not bind it"
                )

    def _get_attr(self, n):
        obj = self.gm
        for part in n.target.split("."):
            obj = getattr(obj, part)
        if not isinstance(obj, torch.Tensor):
            raise Unsupported(f"op get_attr ({n.target}: {type(obj).__name__})")
        vid = self.b.input(dtype_of(obj.dtype, n.target), tuple(obj.shape))
        self.inputs.append(InputSpec("attr", tensor=obj))
        return Ref(vid)

    def _check(self, n: torch.fx.Node, result) -> None:
        """Note [Export checks every node against PyTorch]."""
        v = meta_val(n)
        if isinstance(result, Ref) and isinstance(v, torch.Tensor):
            t = self.b.tensor(result.vid)
            want_dtype = DType.from_torch(v.dtype)
            want_shape = self.shape(v)
            if t.dtype != want_dtype or not _same_shape(t.shape, want_shape, self.b.symbols):
                raise ExportError(
                    f"node {n.name} ({n.target}): the IR gives {t}, PyTorch gives "
                    f"{TensorType(want_dtype or t.dtype, want_shape)}"
                )

    def _outputs(self, out_node, placeholders) -> Exported:
        leaves, spec = pytree.tree_flatten(out_node.args[0] if out_node is not None else ())
        outputs: list[OutputSpec] = []
        ir_out: dict[int, int] = {}
        for leaf in leaves:
            v = self.env[leaf] if isinstance(leaf, torch.fx.Node) else leaf
            if isinstance(v, Ref) and v.vid in self.placeholder_vid:
                kind = "input" if leaf.op == "placeholder" else "input_copy"
                outputs.append(OutputSpec(kind, self.placeholder_vid[v.vid]))
            elif isinstance(v, Ref):
                if v.vid not in ir_out:
                    ir_out[v.vid] = len(ir_out)
                    self.b.output(v.vid)
                outputs.append(OutputSpec("ir", ir_out[v.vid]))
            elif isinstance(v, (SymExpr, SymBool)):  # evaluated from the call's symbols
                outputs.append(OutputSpec("sym", sym=v))
            elif v is None or isinstance(v, (bool, int, float)):
                outputs.append(OutputSpec("const", value=v))
            else:
                raise Unsupported(f"output of type {type(v).__name__}")
        return Exported(
            self.b.finish(), self.inputs, outputs, spec, len(placeholders), dict(self.sym_names)
        )


def _bound(v, default: int) -> int:
    try:
        iv = int(v)
    except Exception:  # noqa: BLE001 - int_oo and other infinities
        return default
    return max(NEG_INF, min(POS_INF, iv))


def _symints(v):
    if isinstance(v, torch.SymInt):
        yield v
    elif isinstance(v, torch.Tensor):
        for d in v.shape:
            if isinstance(d, torch.SymInt):
                yield d


_SAMPLES = (2, 3, 5, 7, 16, 17, 64, 1000, 4099)


def _same_shape(a: tuple, b: tuple, symbols: list) -> bool:
    """Equal dims (the core's canonical forms); dims whose forms differ (PyTorch's expression may
    not simplify as far) are compared by evaluating them at sample points."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        names = {s.name for s in symbols}
        for k in range(len(_SAMPLES)):
            bind = {n: _SAMPLES[(k + j) % len(_SAMPLES)] for j, n in enumerate(sorted(names))}
            if x.evaluate(bind) != y.evaluate(bind):
                return False
    return True
