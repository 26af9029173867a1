"""Graphs with symbolic shapes through AOTAutograd: dyngen compiles the forward and the backward.

Note [Decompositions]
AOTAutograd is run with a small table: ops that have a decomposition into catalog ops and no
catalog op of their own (softmax and its backward, tanh/threshold backward, rsub). silu_backward
and sigmoid_backward stay whole (they are catalog ops, and the fused epilogues want them). Ops
without either still trace; export names them in Unsupported and that graph runs eagerly.
"""
from __future__ import annotations

import torch
from torch._decomp import get_decompositions
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

from .errors import FallbackError
from .stats import bump, record_fallback
from .compiled import compile_graph
from .options import log

aten = torch.ops.aten

DECOMPOSITIONS = get_decompositions([
    aten._softmax, aten._softmax_backward_data, aten._log_softmax,
    aten._log_softmax_backward_data, aten.tanh_backward, aten.threshold_backward, aten.rsub,
])


def _compile_or_eager(gm: torch.fx.GraphModule, example_inputs, name: str, prebuild_archs=None):
    """dyngen's executable for one ATen graph, or the graph itself (eager, every shape) when
    dyngen cannot take it; the reason is recorded either way."""
    try:
        fn = compile_graph(gm, example_inputs, name, prebuild_archs=prebuild_archs)
    except FallbackError:  # DYNGEN_STRICT=1 (Note [No silent fallbacks])
        raise
    except Exception as e:  # noqa: BLE001 - any failure falls back, never a per-shape recompile
        record_fallback(name, f"{type(e).__name__}: {e}")
        log.debug("eager ATen graph for %s:\n%s", name, gm.code)
        fn = gm
    return make_boxed_func(fn)


def compile_dynamic(gm: torch.fx.GraphModule, example_inputs, name: str = "graph",
                    prebuild_archs=None):
    """AOTAutograd over a Dynamo graph with dyngen as forward, backward and inference compiler.
    `prebuild_archs`: runtime.compile_ir (captured here: the backward compiles later)."""
    p = prebuild_archs
    return aot_module_simplified(
        gm, example_inputs,
        fw_compiler=lambda g, i: _compile_or_eager(g, i, f"{name}.forward", p),
        bw_compiler=lambda g, i: _compile_or_eager(g, i, f"{name}.backward", p),
        inference_compiler=lambda g, i: _compile_or_eager(g, i, f"{name}.inference", p),
        decompositions=DECOMPOSITIONS,
        keep_inference_input_mutations=True,
    )


_counter = 0


def backend(gm: torch.fx.GraphModule, example_inputs):
    """A plain `torch.compile` backend: every graph through AOTAutograd and dyngen, no Thunder."""
    global _counter
    _counter += 1
    bump("backend_calls")
    return compile_dynamic(gm, example_inputs, f"graph{_counter - 1}")
