"""Outputs of an ATen graph that are views: PyTorch computes them, on the caller's tensors.

Note [Outputs that are views]
dyngen's GraphRunners write every output into a fresh contiguous tensor. That is the right value,
but not the right tensor when the ATen graph's output is a view of one of its inputs (or of another
output): AOTAutograd does not take such an output as it comes, it regenerates the alias from the
real base (runtime_wrappers.AliasOfInputHandler, gen_alias_from_base), and when the view has
symbolic sizes it does that by `base.as_strided(out.size(), out.stride(), out.storage_offset())`
with the compiled output's strides and offset. A contiguous output then reads the base in the wrong
order: OLMoE's attention under FSDP2 returns `value_states = v.view(1, s, heads, d).transpose(1,
2)` straight from an input (FSDP2's graph breaks put v_proj in a graph of its own), and it came back
as a transposed copy read as if it were the view, 140% off, silently. So each output
whose ATen node is a chain of view ops (OpOverload.is_view, and getitem of a split) from a
placeholder or from another output is recomputed here by that same chain, run by PyTorch on the
real base: a true view with eager's strides and offset, which costs no kernel. Outputs whose chain
starts at an intermediate that is not an output keep dyngen's value (AOTAutograd returns the base
of such aliases as an output of its own, so they do not occur in its graphs).
"""

from __future__ import annotations

import functools
import operator

import torch
from torch.utils import _pytree as pytree

from .compiled import flat_container


class _NotAView(Exception):
    pass


def _is_view(n: torch.fx.Node) -> bool:
    if n.op != "call_function":
        return False
    if n.target is operator.getitem:
        return isinstance(n.args[0], torch.fx.Node) and _is_view(n.args[0])
    return isinstance(n.target, torch._ops.OpOverload) and n.target.is_view


def _is_scalar(n: torch.fx.Node) -> bool:
    v = n.meta.get("val")
    return n.op == "call_function" and isinstance(
        v, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)
    )


def view_replay(gm: torch.fx.GraphModule):
    """(indices of the flat outputs recomputed, a GraphModule taking (*graph inputs, *flat
    outputs) and returning those outputs as views), or None when no output is a view."""
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    flat, _ = pytree.tree_flatten(out_node.args[0])
    g = torch.fx.Graph()
    env = {n: g.placeholder(n.name) for n in gm.graph.nodes if n.op == "placeholder"}
    produced = [g.placeholder(f"out{i}") for i in range(len(flat))]
    plain = {
        n: produced[i]
        for i, n in reversed(list(enumerate(flat)))
        if isinstance(n, torch.fx.Node) and not _is_view(n) and n.op != "placeholder"
    }

    def get(n):
        if n in env:
            return env[n]
        if n in plain:
            return plain[n]
        if not (_is_view(n) or _is_scalar(n)):
            raise _NotAView(n.name)
        env[n] = g.node_copy(n, get)
        return env[n]

    picked, results = [], []
    for i, n in enumerate(flat):
        if not (isinstance(n, torch.fx.Node) and _is_view(n)):
            continue
        try:
            results.append(get(n))
        except _NotAView:
            continue
        picked.append(i)
    if not picked:
        return None
    g.output(tuple(results))
    g.eliminate_dead_code()
    return picked, torch.fx.GraphModule(torch.nn.Module(), g)


def with_true_views(gm: torch.fx.GraphModule, fn):
    """`fn` (gm compiled), its outputs that are views in gm made true views (Note [Outputs that
    are views])."""
    found = view_replay(gm)
    if found is None:
        return fn
    picked, replay = found
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    flat_type = flat_container(pytree.tree_flatten(out_node.args[0])[1])

    def run(*args):
        out = fn(*args)
        if flat_type is not None:  # AOTAutograd's graphs: no pytree walk
            leaves, rebuild = list(out), type(out)
        else:
            leaves, spec = pytree.tree_flatten(out)
            rebuild = functools.partial(pytree.tree_unflatten, treespec=spec)
        for i, v in zip(picked, replay(*args, *leaves)):
            leaves[i] = v
        return rebuild(leaves)

    run.views_replayed = picked
    return run
