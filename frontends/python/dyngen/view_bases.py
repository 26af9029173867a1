"""Outputs that are every slice of one intermediate: dyngen returns the intermediate, PyTorch the
slices, as views.

Note [Outputs that slice one intermediate]
A grouped MoE layer's backward returns each expert's LoRA gradient as `select(gw, 0, e)` of one
grouped weight gradient gw [E, N, K] (moe/ops.py), so the ATen graph has E outputs that are
views of an intermediate which is not itself an output: 384 of them for OLMoE's layer. Compiled
as they come, each is a copy kernel into an output tensor of its own (1262 us of the layer's
3839 us backward at T = 4096 by `dyngen plan`, all launch-bound) and one allocation per call in
the runner. Instead, when an intermediate's selects along one dim, each at a constant index,
cover every index of that dim (and the dim's size is static), the graph handed to dyngen returns
the intermediate itself once (its kernel writes the caller's tensor directly) and the selects'
positions hold None; after the call, the selects are made by PyTorch as views of that tensor
(one `unbind`), in the positions the original graph gives them. The values are the same bytes;
the difference is that the gradients share one storage, as eager's `gw.unbind(0)` would: the
autograd engine accumulates into each view in place and an optimizer sees ordinary tensors. The
intermediate is kept alive only as long as its views are, and they cover all of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree

from .compiled import flat_container

_SELECT = torch.ops.aten.select.int


@dataclass
class _Group:
    base: torch.fx.Node
    dim: int
    positions: dict  # output position -> index along dim


def _static_size(node: torch.fx.Node, dim: int) -> int | None:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not -val.dim() <= dim < val.dim():
        return None
    size = val.shape[dim]
    return size if isinstance(size, int) else None


def _groups(flat: list) -> list[_Group]:
    outputs = {n for n in flat if isinstance(n, torch.fx.Node)}
    found: dict = {}
    for pos, n in enumerate(flat):
        if not (isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target is _SELECT):
            continue
        base, dim, index = (list(n.args) + [None] * 3)[:3]
        if not (isinstance(base, torch.fx.Node) and base.op == "call_function"):
            continue  # placeholders are handled by Note [Outputs that are views]
        if base in outputs or not isinstance(dim, int) or not isinstance(index, int):
            continue
        size = _static_size(base, dim)
        if size is None:
            continue
        dim = dim % base.meta["val"].dim()
        g = found.setdefault((base, dim), _Group(base, dim, {}))
        g.positions[pos] = index % size
    return [
        g
        for g in found.values()
        if set(g.positions.values()) == set(range(_static_size(g.base, g.dim)))
    ]


@dataclass
class GroupedOutputs:
    """`gm` with its grouped selects replaced by None and their bases appended as outputs, and
    how to rebuild the original outputs from its results."""

    gm: torch.fx.GraphModule
    num_outputs: int
    groups: list

    def wrap(self, fn):
        """`fn` (self.gm compiled) returning the original graph's outputs."""
        n, groups = self.num_outputs, self.groups

        def run(*args):
            out = fn(*args)
            leaves = list(out[:n])
            for g, base in zip(groups, out[n:]):
                parts = base.unbind(g.dim)
                for pos, index in g.positions.items():
                    leaves[pos] = parts[index]
            return type(out)(leaves)

        run.selects_from_bases = sum(len(g.positions) for g in groups)
        return run


def group_select_outputs(gm: torch.fx.GraphModule) -> GroupedOutputs | None:
    """The rewrite of Note [Outputs that slice one intermediate], or None when no intermediate's
    selects cover it (or the outputs are not a flat tuple or list)."""
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    flat, spec = pytree.tree_flatten(out_node.args[0])
    if flat_container(spec) is None:
        return None
    groups = _groups(flat)
    if not groups:
        return None
    picked = {pos for g in groups for pos in g.positions}
    new_outputs = [None if i in picked else n for i, n in enumerate(flat)]
    new_outputs += [g.base for g in groups]
    graph = torch.fx.Graph()
    env: dict = {}
    graph.graph_copy(gm.graph, env)  # every node but the output, metadata kept
    graph.output(spec.type(env[o] if o is not None else None for o in new_outputs))
    graph.eliminate_dead_code()
    return GroupedOutputs(torch.fx.GraphModule(gm, graph), len(flat), groups)
