"""An exported FX graph bound to a GraphRunner, callable with the FX graph's own arguments."""

from __future__ import annotations

import logging

import torch
from torch.utils import _pytree as pytree

from .counters import bump, dump
from .executors import runtime
from .fx.export import Exported, export
from .options import log, options


class CompiledGraph:
    """Calls the GraphRunner with the IR inputs taken from the FX arguments (tensors made
    contiguous, SymInts as ints) and rebuilds the FX outputs (Note [Export outputs])."""

    def __init__(self, exported: Exported, name: str = "graph", device=None, prebuild_archs=None):
        """`device`: where the example inputs live; the executor follows it (Note [Executor
        choice]). `prebuild_archs`: see runtime.compile_ir."""
        self.exported = exported
        self.name = name
        self.runner = None
        if exported.graph.outputs:
            self.runner = runtime.compile_ir(
                exported.graph, name, device=device, prebuild_archs=prebuild_archs
            )
        self._needs_bind = any(o.kind == "sym" for o in exported.outputs)
        self._flat_type = flat_container(exported.out_spec)

    def __call__(self, *args):
        ex = self.exported
        ins = []
        for spec in ex.inputs:
            x = args[spec.index] if spec.kind == "placeholder" else spec.tensor
            if isinstance(x, torch.Tensor):
                ins.append(x if x.is_contiguous() else x.contiguous())
            else:
                ins.append(int(x))
        outs = self.runner.run(ins) if self.runner is not None else []
        bind = ex.graph.bind_symbols(ins) if self._needs_bind else {}
        leaves = []
        for o in ex.outputs:
            if o.kind == "ir":
                leaves.append(outs[o.index])
            elif o.kind == "input":
                leaves.append(args[o.index])
            elif o.kind == "input_copy":
                leaves.append(args[o.index].clone())
            elif o.kind == "sym":
                leaves.append(o.sym.evaluate(bind))
            else:
                leaves.append(o.value)
        if self._flat_type is not None:  # AOTAutograd's graphs: a flat tuple or list
            return self._flat_type(leaves)
        return pytree.tree_unflatten(leaves, ex.out_spec)


def flat_container(spec: pytree.TreeSpec):
    """tuple or list when `spec` is one of leaves only (rebuilt without the pytree walk, which
    costs about a microsecond a leaf: 400-600 of them for a grouped MoE layer), else None."""
    if spec.type not in (tuple, list):
        return None
    if all(spec.child(i).is_leaf() for i in range(spec.num_children)):
        return spec.type
    return None


def compile_fx_graph(
    gm: torch.fx.GraphModule, example_inputs=None, name: str = "graph", prebuild_archs=None
) -> CompiledGraph:
    """Exports `gm` and compiles it with the process's executor (raises Unsupported);
    `prebuild_archs`: runtime.compile_ir."""
    return compile_exported(
        export(gm, example_inputs, name=name), example_inputs, name, prebuild_archs
    )


def compile_exported(
    exported: Exported, example_inputs=None, name: str = "graph", prebuild_archs=None
) -> CompiledGraph:
    """compile_fx_graph's second half, for a graph already exported (pinned.py exports its own)."""
    bump("exported_graphs")
    # The C executor compiles from the graph's handle: the text and graph.fb are made only for
    # DYNGEN_DUMP and the debug log (Note [Executor choice]).
    if options().dump_dir:
        dump(name, exported.text, exported.fb)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("exported %s:\n%s", name, exported.text)
    # The CUDA tensors' device if any (a 0-d CPU scalar beside them does not decide), else CPU.
    tensors = [x for x in (example_inputs or []) if isinstance(x, torch.Tensor)]
    device = next((x.device for x in tensors if x.device.type == "cuda"), None)
    return CompiledGraph(exported, name, device, prebuild_archs)
