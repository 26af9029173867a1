"""Partial graphs: an ATen graph with ops dyngen cannot take still compiles the regions it can.

Note [Partial graphs]
When a whole ATen graph does not export (an op outside the catalog, a construct the IR cannot
express), each call node is asked whether dyngen takes it (`node_reason`). The nodes it takes are
grouped into regions by torch.fx's CapabilityBasedPartitioner (which never forms a region that a
path leaves and re-enters through an ATen op), each region becomes a sub-GraphModule compiled by
dyngen with symbolic shapes, and the rest stays in the outer GraphModule as ATen ops that PyTorch
runs. Every piece works for every size, so the graph still compiles once.

A region's IR inputs must bind its symbols (Note [Export outputs] in fx/export.py: a symbol is bound
where it is a whole input dim or a sym input). When a region sees a symbol only inside compound
dims (2*s0) or not at all in its inputs, the outer graph passes that symbol in as an extra SymInt
argument, read from where the symbol is defined (a placeholder's dim, or the node that makes an
unbacked size).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .compiled import compile_fx_graph
from .fx.export import unsupported_reason
from .fx.node_to_ir import op_key
from .fx.random_draws import hoist_random_draws
from .fx.values import meta_val, symbol_sources

aten = torch.ops.aten


@dataclass
class PartialResult:
    """What `compile_partial` made: the callable and where each op of the graph runs."""

    fn: object
    regions: int = 0  # regions dyngen compiled
    dyngen_ops: int = 0  # call nodes inside those regions
    aten_ops: int = 0  # call nodes PyTorch runs (random draws apart)
    rng_draws: int = 0  # random draws PyTorch runs first (Note [Random numbers])
    host_reads: int = 0  # sizes read from tensors (Note [Sizes read from tensors])
    aten_reasons: dict = field(default_factory=dict)  # op name -> why dyngen did not take it


def _free_symbols(v) -> set:
    out = set()
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        out |= set(v.node.expr.free_symbols)
    elif isinstance(v, torch.Tensor):
        for d in v.shape:
            if isinstance(d, torch.SymInt):
                out |= set(d.node.expr.free_symbols)
    elif isinstance(v, (list, tuple)):
        for x in v:
            out |= _free_symbols(x)
    return out


def _symint_of(node: torch.fx.Node, dim):
    v = meta_val(node)
    return v if dim is None else v.shape[dim]


def node_reason(node: torch.fx.Node) -> str | None:
    """None when dyngen takes this call node, else why not (export's own per-node check)."""
    return unsupported_reason(node)


def op_name(node: torch.fx.Node) -> str:

    return op_key(node)[1]


class _Supported(OperatorSupportBase):
    def __init__(self, supported: set):
        self.supported = supported

    def is_node_supported(self, submodules, node) -> bool:
        return node in self.supported


class _Region(torch.nn.Module):
    """A region compiled by dyngen, called by the outer graph like the submodule it replaces."""

    def __init__(self, compiled):
        super().__init__()
        self.compiled = compiled

    def forward(self, *args):
        return self.compiled(*args)


def _calls(gm) -> list:
    return [n for n in gm.graph.nodes if n.op == "call_function"]


def compile_partial(gm: torch.fx.GraphModule, name: str) -> PartialResult:
    """Note [Partial graphs]. Returns the outer GraphModule (regions replaced by dyngen's
    compiled graphs) and the op counts; a region that does not compile stays as ATen ops."""

    sources = symbol_sources(gm)
    n_calls = len(_calls(gm))
    hoisted = hoist_random_draws(gm, sources)
    calls = [n for n in _calls(gm) if n not in hoisted.nodes]
    n_calls -= hoisted.draws + hoisted.erased
    supported, reasons = set(), {}
    host_reads = [n for n in calls if n.target is aten._local_scalar_dense.default]
    n_calls -= len(host_reads)
    for n in calls:
        if n in host_reads:
            continue
        why = node_reason(n)
        if why is None:
            supported.add(n)
        else:
            reasons.setdefault(op_name(n), why)
    result = PartialResult(
        gm,
        aten_ops=n_calls,
        aten_reasons=reasons,
        rng_draws=hoisted.draws,
        host_reads=len(host_reads),
    )
    if not supported:
        return result
    partitioner = CapabilityBasedPartitioner(
        gm, _Supported(supported), allows_single_node_partition=True
    )
    partitions = partitioner.propose_partitions()
    if not partitions:
        return result
    fused = partitioner.fuse_partitions(partitions)
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith("fused_"):
            continue
        sub = getattr(fused, node.target)
        n_ops = len(_calls(sub))
        _add_symbol_inputs(fused, node, sub, sources)
        try:
            examples = [p.meta.get("val") for p in sub.graph.nodes if p.op == "placeholder"]
            compiled = compile_fx_graph(sub, examples, f"{name}.{node.target}")
        except Exception as e:  # noqa: BLE001 - this region runs as ATen ops
            reasons.setdefault(f"region {node.target}", f"{type(e).__name__}: {e}")
            continue
        setattr(fused, node.target, _Region(compiled))
        result.regions += 1
        result.dyngen_ops += n_ops
    fused.recompile()
    result.fn = fused
    result.aten_ops = n_calls - result.dyngen_ops
    return result


def _add_symbol_inputs(
    outer: torch.fx.GraphModule, call: torch.fx.Node, sub: torch.fx.GraphModule, sources: dict
) -> None:
    """Gives the region's placeholders their metadata and passes in, as SymInt arguments, the
    symbols its inputs do not bind whole (Note [Partial graphs])."""
    phs = [n for n in sub.graph.nodes if n.op == "placeholder"]
    for p, a in zip(phs, call.args):
        if isinstance(a, torch.fx.Node):
            p.meta["val"] = meta_val(a)
    whole, used = set(), set()
    for p in phs:
        v = p.meta.get("val")
        if isinstance(v, torch.SymInt) and v.node.expr.is_Symbol:
            whole.add(v.node.expr)
        elif isinstance(v, torch.Tensor):
            whole |= {
                d.node.expr
                for d in v.shape
                if isinstance(d, torch.SymInt) and d.node.expr.is_Symbol
            }
    for n in sub.graph.nodes:
        used |= _free_symbols(meta_val(n))
    # Only a symbol defined before the call in the outer graph can be passed in; one defined
    # inside the region (an unbacked size it computes) is the region's own.
    before = set()
    for n in outer.graph.nodes:
        if n is call:
            break
        before.add(n)
    missing = sorted((s for s in used - whole if s in sources and sources[s][0] in before), key=str)
    if not missing:
        return
    new_args = list(call.args)
    last = phs[-1] if phs else None
    for s in missing:
        node, dim = sources[s]
        with outer.graph.inserting_before(call):
            arg = node if dim is None else outer.graph.call_function(aten.sym_size.int, (node, dim))
        arg.meta["val"] = _symint_of(node, dim)
        new_args.append(arg)
        ctx = (
            sub.graph.inserting_after(last)
            if last is not None
            else sub.graph.inserting_before(next(iter(sub.graph.nodes)))
        )
        with ctx:
            p = sub.graph.placeholder(f"sym_{s}")
        p.meta["val"] = _symint_of(node, dim)
        last = p
    call.args = tuple(new_args)
    sub.recompile()
