"""Random draws in an ATen graph: hoisted ahead of the graph's compute, drawn by PyTorch.

Note [Random numbers]
A training graph can draw random numbers (Phi-3.5-MoE's router jitter: `uniform_`, `exponential_`,
`rand_like`; DBRX's `uniform_`). dyngen does not generate them: PyTorch's generator draws them, so
a model trained under dyngen sees the very numbers eager PyTorch would draw, and losses stay
comparable with eager's step for step. What makes that cheap is that such a draw depends on a
shape, never on a value: `exponential_(x)` overwrites x, and `rand_like(x)` reads x's shape,
dtype, device and strides only. So each draw moves to the top of the graph, in its original
order (the generator's stream is consumed in the same order as eagerly), drawing into a fresh
`empty_strided` of the shape its operand had; everything after it no longer waits on a draw, and
the rest of the graph is one region compiled by dyngen (Note [Partial graphs]) instead of being cut
at every draw.

One known difference from eager: AOTAutograd's backward of an autograd.Function can hold dead
draws (Phi-3.5-MoE's MultiplierProcessor: its backward graph re-traces the router's rand_like and
uniform, results unused). They are in the graph, so they are drawn, as under any AOTAutograd
backend, and the stream moves ahead of eager's from the next draw on.

The hoist is all or nothing: a seeded op whose result depends on values (bernoulli with a tensor
p, native_dropout, multinomial), or a shape that is not a sum or product of the graph's input
sizes, leaves the graph as it was, since moving only some draws would reorder the stream.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import sympy
import torch
import torch.fx

from .values import meta_val

aten = torch.ops.aten

# Seeded ops whose result depends on their tensor operand's shape, dtype, device and strides only.
SHAPE_ONLY_DRAWS = {
    "rand_like",
    "randn_like",
    "randint_like",
    "uniform",
    "exponential",
    "normal",
    "random",
    "geometric",
    "log_normal",
    "cauchy",
    "rand",
    "randn",
    "randint",
    "bernoulli",
}


def _is_draw(n: torch.fx.Node) -> bool:
    t = n.target
    return (
        n.op == "call_function"
        and isinstance(t, torch._ops.OpOverload)
        and torch.Tag.nondeterministic_seeded in t.tags
        and not _no_dropout(n)
    )


def _no_dropout(n: torch.fx.Node) -> bool:
    """An op tagged as seeded only for its dropout (the attention kernels, such as
    `_scaled_dot_product_flash_attention_for_cpu`), called with dropout_p == 0: it draws nothing,
    so it neither moves the generator's stream nor blocks the hoist of the real draws."""
    names = [a.name for a in n.target._schema.arguments]
    if "dropout_p" not in names:
        return False
    i = names.index("dropout_p")
    p = n.args[i] if i < len(n.args) else n.kwargs.get("dropout_p", 0.0)
    return isinstance(p, (int, float)) and p == 0


def _shape_only(n: torch.fx.Node) -> bool:
    name = n.target.overloadpacket.__name__
    if name not in SHAPE_ONLY_DRAWS:
        return False
    if name == "bernoulli":  # bernoulli(x, p: float) only; with a tensor p the values matter
        return len(n.args) > 1 and isinstance(n.args[1], float)
    # Any other operand must be a constant: normal(x, mean, std) with tensor moments reads values.
    return all(not isinstance(a, torch.fx.Node) for a in n.args[1:]) and all(
        not isinstance(a, torch.fx.Node) for a in n.kwargs.values()
    )


class _SizeNodes:
    """FX nodes computing symbolic sizes from the graph's inputs, inserted at the graph's top."""

    def __init__(self, gm: torch.fx.GraphModule, sources: dict, anchor: torch.fx.Node):
        self.g, self.sources, self.anchor, self.memo = gm.graph, sources, anchor, {}
        self.inserted: list = []

    def _insert(self, target, args) -> torch.fx.Node:
        with self.g.inserting_after(self.anchor):
            n = self.g.call_function(target, args)
        self.anchor = n
        self.inserted.append(n)
        return n

    def of(self, e):
        """An int, or a node holding the value of sympy expression e; None when not expressible."""
        if isinstance(e, torch.SymInt):
            e = e.node.expr
        if isinstance(e, int) or (isinstance(e, sympy.Integer)):
            return int(e)
        if e in self.memo:
            return self.memo[e]
        if isinstance(e, sympy.Symbol):
            if e not in self.sources:
                return None
            node, dim = self.sources[e]
            if node.op != "placeholder":  # an unbacked size computed later in the graph
                return None
            r = node if dim is None else self._insert(aten.sym_size.int, (node, dim))
            r.meta["val"] = meta_val(node) if dim is None else meta_val(node).shape[dim]
        elif isinstance(e, (sympy.Add, sympy.Mul)):
            parts = [self.of(a) for a in e.args]
            if any(p is None for p in parts):
                return None
            op = operator.add if isinstance(e, sympy.Add) else operator.mul
            r = parts[0]
            for p in parts[1:]:
                r = self._insert(op, (r, p))
        else:
            return None
        self.memo[e] = r
        return r

    def all_of(self, sizes):
        out = [self.of(s) for s in sizes]
        return None if any(o is None for o in out) else out


@dataclass
class Hoisted:
    """What hoist_random_draws did: the nodes PyTorch runs at the top (the draws, their fresh
    operands and the size arithmetic), how many of them are draws, and how many of the graph's
    own nodes (operands only the draws read) it removed."""

    nodes: set = field(default_factory=set)
    draws: int = 0
    erased: int = 0


def hoist_random_draws(gm: torch.fx.GraphModule, sources: dict) -> Hoisted:
    """Note [Random numbers]. Rewrites gm in place; `sources`: values.symbol_sources(gm)."""
    draws = [n for n in gm.graph.nodes if _is_draw(n)]
    if not draws or not all(_shape_only(n) for n in draws):
        return Hoisted()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if not placeholders:
        return Hoisted()
    sizes = _SizeNodes(gm, sources, placeholders[-1])
    plans = []
    for n in draws:
        operand = n.args[0] if n.args and isinstance(n.args[0], torch.fx.Node) else None
        if operand is None or operand in draws:
            plans.append((n, None))
            continue
        v = meta_val(operand)
        if not isinstance(v, torch.Tensor):
            return _undo(gm, sizes)
        shape, stride = sizes.all_of(v.shape), sizes.all_of(v.stride())
        if shape is None or stride is None:
            return _undo(gm, sizes)
        plans.append((n, (shape, stride, v)))
    out = Hoisted(set(sizes.inserted), len(draws))
    anchor = sizes.anchor
    for n, plan in plans:
        if plan is not None:
            shape, stride, v = plan
            with gm.graph.inserting_after(anchor):
                fresh = gm.graph.call_function(
                    aten.empty_strided.default,
                    (shape, stride),
                    {"dtype": v.dtype, "device": v.device},
                )
            fresh.meta["val"] = v
            operand = n.args[0]
            n.args = (fresh,) + tuple(n.args[1:])
            if not operand.users and operand.op == "call_function":  # e.g. empty_like(x)
                gm.graph.erase_node(operand)
                out.erased += 1
            anchor = fresh
            out.nodes.add(fresh)
        anchor.append(n)  # moves n right after anchor, keeping the draws in their order
        anchor = n
        out.nodes.add(n)
    gm.graph.lint()
    gm.recompile()
    return out


def _undo(gm: torch.fx.GraphModule, sizes: _SizeNodes) -> Hoisted:
    for n in reversed(sizes.inserted):
        gm.graph.erase_node(n)
    return Hoisted()
