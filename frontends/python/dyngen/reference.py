"""The reference executor: runs the IR text op by op with PyTorch (Note [Executor choice]).

It parses the text (so everything it runs came through the text form), binds the symbols from the
inputs like dg_prepare, evaluates every node with the PyTorch op of the same semantics, and checks
each result's shape against the node's symbolic type evaluated at the bound symbols.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .errors import LaunchError
from .ops import OPS, Category
from .runtime import Executable, bind_symbols
from .text import parse_graph_text


def _ints(exprs, bind) -> list[int]:
    out = []
    for e in exprs:
        v = e.evaluate(bind)
        if v is None:
            raise LaunchError(f"cannot evaluate {e}")
        out.append(v)
    return out


_UNARY = {"neg": torch.neg, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
          "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "abs": torch.abs,
          "relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu,
          "gelu": F.gelu}
_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
           "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow,
           "silu_backward": torch.ops.aten.silu_backward,
           "sigmoid_backward": torch.ops.aten.sigmoid_backward,
           "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
           "ge": torch.ge}


def _eval(node, xs, bind, device):
    op, a = node.op, node.attrs
    cat = OPS[op].category
    if op == "constant":
        return torch.tensor(a["value"], dtype=a["dtype"].torch, device=device)
    if op == "full":
        return torch.full(_ints(a["shape"], bind), a["value"], dtype=a["dtype"].torch,
                          device=device)
    if cat == Category.CAST:
        return xs[0].to(a["dtype"].torch)
    if cat == Category.UNARY:
        return _UNARY[op](xs[0])
    if cat in (Category.BINARY, Category.COMPARE):
        x, y = xs
        if op in ("silu_backward", "sigmoid_backward", "maximum", "minimum") and x.dtype != y.dtype:
            dt = torch.promote_types(x.dtype, y.dtype) if x.dim() and y.dim() else (
                x.dtype if y.dim() == 0 else y.dtype)
            x, y = x.to(dt), y.to(dt)
        if op in ("silu_backward", "sigmoid_backward"):
            x, y = torch.broadcast_tensors(x, y)
        return _BINARY[op](x, y)
    if op == "where":
        return torch.where(*xs)
    if op == "linear":
        return F.linear(*xs)
    if op == "matmul":
        return torch.matmul(*xs)
    if cat == Category.REDUCE:
        dims = list(a["dims"])
        keep = bool(a.get("keepdim", 0))
        dtype = a["dtype"].torch if "dtype" in a else None
        x = xs[0]
        if not dims:  # reduces nothing (PyTorch's dim=[] would reduce everything)
            return x.to(dtype or x.dtype).clone()
        if op == "sum":
            return torch.sum(x, dims, keepdim=keep, dtype=dtype)
        if op == "mean":
            return torch.mean(x, dims, keepdim=keep, dtype=dtype)
        r = torch.amax(x, dims, keepdim=keep)
        return r if dtype is None else r.to(dtype)
    if op == "reshape":
        return xs[0].reshape(_ints(a["shape"], bind))
    if op == "permute":
        return xs[0].permute(list(a["dims"]))
    if op == "expand":
        return xs[0].expand(_ints(a["shape"], bind))
    if op == "slice":
        (start,), (end,) = _ints(a["start"], bind), _ints(a["end"], bind)
        return xs[0].narrow(a["dim"], start, end - start)[
            (slice(None),) * (a["dim"] % xs[0].dim()) + (slice(None, None, a.get("step", 1)),)]
    if op == "cat":
        return torch.cat(xs, a["dim"])
    if op == "index_select":
        return torch.index_select(xs[0], a["dim"], xs[1])
    if op == "index_add":
        return torch.index_add(xs[0], a["dim"], xs[1], xs[2])
    raise LaunchError(f"reference executor: no evaluation for op {op}")


class ReferenceExecutable(Executable):
    kind = "reference"

    def __init__(self, text: str, key: str = ""):
        self.graph = parse_graph_text(text)
        self.key = key

    def prepare(self, inputs):
        bind = bind_symbols(self.graph, inputs)
        return [(tuple(_ints(self.graph.tensor(o).shape, bind)), self.graph.tensor(o).dtype.torch)
                for o in self.graph.outputs]

    def run(self, inputs):
        g = self.graph
        bind = bind_symbols(g, inputs)
        device = next((x.device for x in inputs if isinstance(x, torch.Tensor)),
                      torch.device("cpu"))
        vals = dict(zip(g.inputs, inputs))
        for node in g.nodes:
            r = _eval(node, [vals[i] for i in node.inputs], bind, device)
            t = g.tensor(node.output)
            if list(r.shape) != _ints(t.shape, bind) or r.dtype != t.dtype.torch:
                raise LaunchError(f"reference executor: %{node.output} = {node.op} gave "
                                  f"{r.dtype}{list(r.shape)}, the IR says {t}")
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

