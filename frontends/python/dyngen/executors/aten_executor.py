"""The ATen executor: runs a built graph op by op with ATen ops (Note [Executor choice]). It is
dyngen's production CPU executor (DYNGEN_EXECUTOR=reference selects it everywhere), not the
numerics checker of runtime/reference/.

It interprets the node list GraphBuilder recorded while it forwarded each op to the core (there is
no text parser in Python: Note [One IR] in core/ir.py). It binds the symbols from the inputs like
dg_prepare, evaluates every node with the ATen op of the same semantics, and checks each result's
shape and dtype against the type the core inferred for the node, evaluated by the core at the
bound symbols. An op it has no evaluation for, or a result that disagrees with the core's type, is
a LaunchError naming the op: never a wrong answer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..core.ir import Graph, Node
from ..core.ops import DType
from ..errors import LaunchError
from . import aten_grouped
from .graph_runner import GraphRunner


def _ints(exprs, bind) -> list[int]:
    """SymExpr handles (or plain ints, as attributes may hold) evaluated by the core."""
    out = []
    for e in exprs:
        v = e if isinstance(e, int) else e.evaluate(bind)
        if v is None:
            raise LaunchError(f"ATen executor: cannot evaluate {e} with {bind}")
        out.append(v)
    return out


def _gelu_backward(approximate):
    return lambda g, x: torch.ops.aten.gelu_backward(g, x, approximate=approximate)


_UNARY = {
    "neg": torch.neg,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal,
    "abs": torch.abs,
    "relu": torch.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "gelu": F.gelu,
    "sin": torch.sin,
    "cos": torch.cos,
    "erf": torch.erf,
    "sinc": torch.sinc,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}
_BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "pow": torch.pow,
    "silu_backward": torch.ops.aten.silu_backward,
    "sigmoid_backward": torch.ops.aten.sigmoid_backward,
    "gelu_backward": _gelu_backward("none"),
    "gelu_tanh_backward": _gelu_backward("tanh"),
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
}
# Backward ops take (grad, input) of one shape and dtype in ATen; the IR broadcasts and promotes
# them like the other binary ops.
_SAME_TYPE_BINARY = {
    "silu_backward",
    "sigmoid_backward",
    "gelu_backward",
    "gelu_tanh_backward",
    "maximum",
    "minimum",
}


def _binary(op, x, y):
    if op in _SAME_TYPE_BINARY and x.dtype != y.dtype:
        dt = (
            torch.promote_types(x.dtype, y.dtype)
            if x.dim() and y.dim()
            else (x.dtype if y.dim() == 0 else y.dtype)
        )
        x, y = x.to(dt), y.to(dt)
    if op in _SAME_TYPE_BINARY:
        x, y = torch.broadcast_tensors(x, y)
    return _BINARY[op](x, y)


def _reduce(op, x, a):
    dims = list(a["dims"])
    keep = bool(a.get("keepdim", 0))
    dtype = a["dtype"].torch if "dtype" in a else None
    if not dims:  # reduces nothing (ATen's dim=[] would reduce everything)
        return x.to(dtype or x.dtype).clone()
    if op == "sum":
        return torch.sum(x, dims, keepdim=keep, dtype=dtype)
    if op == "mean":
        return torch.mean(x, dims, keepdim=keep, dtype=dtype)
    r = torch.amax(x, dims, keepdim=keep)
    return r if dtype is None else r.to(dtype)


def _slice(x, a, bind):
    (start,), (end,) = _ints(a["start"], bind), _ints(a["end"], bind)
    dim = a["dim"] % x.dim()
    return x.narrow(dim, start, end - start)[
        (slice(None),) * dim + (slice(None, None, a.get("step", 1)),)
    ]


def _constant(xs, a, bind, device):
    return torch.tensor(a["value"], dtype=a["dtype"].torch, device=device)


def _sym_constant(xs, a, bind, device):
    (v,) = _ints(a["value"], bind)
    return torch.tensor(v, dtype=a["dtype"].torch, device=device)


def _full(xs, a, bind, device):
    return torch.full(_ints(a["shape"], bind), a["value"], dtype=a["dtype"].torch, device=device)


def _cumsum(xs, a, bind, device):
    return torch.cumsum(xs[0], a["dim"], dtype=a["dtype"].torch if "dtype" in a else None)


def _topk(xs, a, bind, device):
    # A stable descending sort: NaN first, ties by the lower index (Note [Top-k op]).
    order = torch.sort(xs[0], dim=-1, descending=True, stable=True).indices
    return order[..., : a["k"]]


def _unary_evaluator(op):
    # _UNARY is read at call time, so a test may replace one of its entries.
    return lambda xs, a, bind, device: _UNARY[op](xs[0])


def _binary_evaluator(op):
    return lambda xs, a, bind, device: _binary(op, *xs)


def _reduce_evaluator(op):
    return lambda xs, a, bind, device: _reduce(op, xs[0], a)


# Every op of ir/ops.def, by name: (inputs, attributes, bound symbols, device) -> its result.
# tests/python/test_aten_executor_catalog.py checks that the two lists name the same ops.
_EVALUATORS = {
    "constant": _constant,
    "sym_constant": _sym_constant,
    "full": _full,
    "cast": lambda xs, a, bind, device: xs[0].to(a["dtype"].torch),
    **{op: _unary_evaluator(op) for op in _UNARY},
    **{op: _binary_evaluator(op) for op in _BINARY},
    "where": lambda xs, a, bind, device: torch.where(*xs),
    "linear": lambda xs, a, bind, device: F.linear(*xs),
    "matmul": lambda xs, a, bind, device: torch.matmul(*xs),
    **{op: _reduce_evaluator(op) for op in ("sum", "mean", "amax")},
    "cumsum": _cumsum,
    "topk": _topk,
    "reshape": lambda xs, a, bind, device: xs[0].reshape(_ints(a["shape"], bind)),
    "permute": lambda xs, a, bind, device: xs[0].permute(list(a["dims"])),
    "expand": lambda xs, a, bind, device: xs[0].expand(_ints(a["shape"], bind)),
    "slice": lambda xs, a, bind, device: _slice(xs[0], a, bind),
    "cat": lambda xs, a, bind, device: torch.cat(xs, a["dim"]),
    "index_select": lambda xs, a, bind, device: torch.index_select(xs[0], a["dim"], xs[1]),
    "index_add": lambda xs, a, bind, device: torch.index_add(xs[0], a["dim"], xs[1], xs[2]),
    "index_copy": lambda xs, a, bind, device: torch.index_copy(
        xs[0], a["dim"], xs[1].long(), xs[2]
    ),
    "gather": lambda xs, a, bind, device: torch.gather(xs[0], a["dim"], xs[1].long()),
    "scatter": lambda xs, a, bind, device: torch.scatter(xs[0], a["dim"], xs[1].long(), xs[2]),
    # Grouped experts (aten_grouped.py): offsets read on the host, a loop over the experts.
    "expert_offsets": lambda xs, a, bind, device: aten_grouped.expert_offsets(
        xs[0], a["num_experts"]
    ),
    "expert_order": lambda xs, a, bind, device: aten_grouped.expert_order(xs[0], a["num_experts"]),
    "grouped_mm": lambda xs, a, bind, device: aten_grouped.grouped_mm(
        xs[0], xs[1], xs[2:], a["w_layout"] == 0
    ),
    "grouped_mm_wgrad": lambda xs, a, bind, device: aten_grouped.grouped_mm_wgrad(*xs),
}
EVALUATED_OPS = frozenset(_EVALUATORS)


def _eval(node: Node, xs, bind, device):
    evaluate = _EVALUATORS.get(node.op)
    if evaluate is None:
        raise LaunchError(f"ATen executor: no evaluation for op {node.op} (%{node.output})")
    return evaluate(xs, node.attrs, bind, device)


class AtenGraphRunner(GraphRunner):
    """A built graph run with ATen ops; `kind` is the name users select it by."""

    kind = "reference"

    def __init__(self, graph: Graph, key: str = ""):
        if graph.nodes is None:
            raise ValueError("the ATen executor needs a graph built by GraphBuilder")
        self.graph = graph
        self.key = key

    def bind_symbols(self, inputs: list) -> dict[str, int]:
        """Binds each symbol at its first sight as a whole dim (or sym input), within the facts it
        was declared with, and checks every other dim, dtype and rank (the rules of dg_prepare)."""
        g = self.graph
        if len(inputs) != len(g.inputs):
            raise LaunchError(f"expected {len(g.inputs)} inputs, got {len(inputs)}")
        bind: dict[str, int] = {}
        checks = []
        for k, (vid, x) in enumerate(zip(g.inputs, inputs)):
            v = g.values[vid]
            if v.is_sym:
                checks.append((k, "value", v.sym, int(x)))
                continue
            if not isinstance(x, torch.Tensor):
                raise LaunchError(f"input {k}: expected a tensor, got {type(x).__name__}")
            t = v.type
            if x.dim() != t.rank or DType.from_torch(x.dtype) != t.dtype:
                raise LaunchError(f"input {k}: expected {t}, got {x.dtype}{list(x.shape)}")
            checks += [(k, f"dim {d}", e, n) for d, (e, n) in enumerate(zip(t.shape, x.shape))]
        for k, _, e, n in checks:
            if e.is_symbol() and e.name not in bind:
                lo, hi, div = g.symbol_facts.get(e.name, (*e.bounds(), 1))
                if not lo <= n <= hi or n % div:
                    raise LaunchError(
                        f"input {k}: {e.name} = {n} is outside its facts [{lo}, {hi}] div {div}"
                    )
                bind[e.name] = int(n)
        for k, where, e, n in checks:
            got = e.evaluate(bind)
            if got != n:
                raise LaunchError(f"input {k} {where}: expected {e} = {got}, got {n}")
        return bind

    def prepare(self, inputs):
        bind = self.bind_symbols(inputs)
        return [
            (tuple(_ints(self.graph.tensor(o).shape, bind)), self.graph.tensor(o).dtype.torch)
            for o in self.graph.outputs
        ]

    def run(self, inputs):
        g = self.graph
        bind = self.bind_symbols(inputs)
        device = next(
            (x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu")
        )
        vals = dict(zip(g.inputs, inputs))
        for node in g.nodes:
            t = g.tensor(node.output)
            try:
                r = _eval(node, [vals[i] for i in node.inputs], bind, device)
            except LaunchError:
                raise
            except (RuntimeError, IndexError, ValueError, TypeError) as e:
                raise LaunchError(f"ATen executor: %{node.output} = {node.op}: {e}") from e
            if list(r.shape) != _ints(t.shape, bind) or r.dtype != t.dtype.torch:
                raise LaunchError(
                    f"ATen executor: %{node.output} = {node.op} gave "
                    f"{r.dtype}{list(r.shape)}, the IR says {t}"
                )
            vals[node.output] = r
        # Outputs are distinct new buffers, as the C executor's are: never a view of an input or
        # of another output.
        seen = {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor)}
        outs = []
        for o in g.outputs:
            r = vals[o]
            ptr = r.untyped_storage().data_ptr()
            if ptr in seen or not r.is_contiguous():
                r = r.clone(memory_format=torch.contiguous_format)
            seen.add(r.untyped_storage().data_ptr())
            outs.append(r)
        return outs
