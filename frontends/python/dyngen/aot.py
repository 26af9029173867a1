"""Graphs with symbolic shapes through AOTAutograd: dyngen compiles the forward and the backward.

Note [Decompositions]
AOTAutograd is run with a small table: ops that have a decomposition into catalog ops and no
catalog op of their own (softmax and its backward, tanh/threshold backward, rsub, layer norm and
its backward, whose var_mean is lowered in fx/nn_ops.py, masked_fill as where). silu_backward
and sigmoid_backward stay whole (they are catalog ops). Ops without either still trace; export
names them in Unsupported, and the graph is compiled in parts around them (Note [Partial graphs]).
"""

from __future__ import annotations

import dataclasses

import torch
from torch._decomp import get_decompositions
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func
from torch._guards import detect_fake_mode
from torch._subclasses.fake_tensor import DataDependentOutputException

from .compiled import compile_graph
from .core.ir import IRTypeError
from .counters import bump, count_where, record_fallback
from .errors import FallbackError, Unsupported
from .options import log
from .partition import compile_partial
from .pinned import PinnedGraph
from .views import with_true_views

aten = torch.ops.aten

DECOMPOSITIONS = get_decompositions(
    [
        aten._softmax,
        aten._softmax_backward_data,
        aten._log_softmax,
        aten._log_softmax_backward_data,
        aten.tanh_backward,
        aten.threshold_backward,
        aten.rsub,
        aten.native_layer_norm,
        aten.native_layer_norm_backward,
        aten.masked_fill,
    ]
)


def _compile_or_eager(
    gm: torch.fx.GraphModule, example_inputs, name: str, report=None, prebuild_archs=None
):
    """dyngen's executable for one ATen graph; when the whole graph does not export, dyngen
    compiles the regions it can and PyTorch runs the rest (Note [Partial graphs]); each outcome is
    counted (Note [Where graphs and ops ran]), logged, and passed to `report(part)`.
    `prebuild_archs`: runtime.compile_ir."""
    n_ops = sum(1 for n in gm.graph.nodes if n.op == "call_function")
    try:
        fn = compile_graph(gm, example_inputs, name, prebuild_archs=prebuild_archs)
        part = {"graph": name, "where": "dyngen", "dyngen_ops": n_ops, "aten_ops": 0, "reason": ""}
    except FallbackError:  # DYNGEN_STRICT=1 (Note [No silent fallbacks])
        raise
    except (Unsupported, IRTypeError) as e:
        part = _pinned(gm, example_inputs, name, e, prebuild_archs)
        fn = part.pop("fn")
    except Exception as e:  # noqa: BLE001 - an internal error: this graph runs as ATen ops
        part = {
            "graph": name,
            "where": "aten",
            "dyngen_ops": 0,
            "aten_ops": n_ops,
            "reason": f"{type(e).__name__}: {e}",
        }
        fn = gm
    count_where(
        part["where"],
        dyngen=part["dyngen_ops"],
        aten=part["aten_ops"],
        rng=part.get("rng_draws", 0),
        host=part.get("host_reads", 0),
    )
    if part["where"] == "dyngen":
        log.info(
            "%s: compiled by dyngen (%d ops; by PyTorch: %d random draws, Note [Random "
            "numbers], %d sizes read from tensors, Note [Sizes read from tensors])",
            name,
            part["dyngen_ops"],
            part.get("rng_draws", 0),
            part.get("host_reads", 0),
        )
    else:
        record_fallback(
            name,
            part["reason"],
            what="runs in part as ATen ops" if part["where"] == "partial" else "runs eagerly",
        )
        log.debug("ATen graph for %s:\n%s", name, gm.code)
    if report is not None:
        report(part)
    return make_boxed_func(with_true_views(gm, fn))  # Note [Outputs that are views]


def _pinned(gm, example_inputs, name: str, error: Exception, prebuild_archs) -> dict:
    """The graph under Dynamo's guards and pinned symbols (Note [Pinned symbols]); when that does
    not export either, in parts (an Unsupported op) or as ATen ops (an IR typing error)."""
    n_ops = sum(1 for n in gm.graph.nodes if n.op == "call_function")

    def without_pins() -> dict:
        if isinstance(error, Unsupported):
            return _partial(gm, name, str(error))
        reason = f"{type(error).__name__}: {error}"
        return {
            "graph": name,
            "where": "aten",
            "dyngen_ops": 0,
            "aten_ops": n_ops,
            "fn": gm,
            "reason": reason,
        }

    try:
        fn = PinnedGraph(gm, example_inputs, name, prebuild_archs, lambda: without_pins()["fn"])
    except FallbackError:
        raise
    except Exception as e:  # noqa: BLE001 - the symbolic failure stands
        log.debug("%s: pinning symbols did not help: %s: %s", name, type(e).__name__, e)
        return without_pins()
    pins = ", ".join(str(s) for s in fn.pinned) or "none"
    return {
        "graph": name,
        "where": "dyngen",
        "dyngen_ops": n_ops,
        "aten_ops": 0,
        "fn": fn,
        "pinned": pins,
        "reason": "",
    }


def _partial(gm: torch.fx.GraphModule, name: str, whole_reason: str) -> dict:
    try:
        r = compile_partial(gm, name)
    except Exception as e:  # noqa: BLE001 - partitioning failed: the graph runs as ATen ops
        n = sum(1 for x in gm.graph.nodes if x.op == "call_function")
        return {
            "graph": name,
            "where": "aten",
            "dyngen_ops": 0,
            "aten_ops": n,
            "fn": gm,
            "reason": f"{whole_reason}; partitioning failed: {type(e).__name__}: {e}",
        }
    why = "; ".join(f"{op}: {msg}" for op, msg in r.aten_reasons.items()) or whole_reason
    if r.regions and not r.aten_reasons:  # dyngen runs all but the draws (Note [Random numbers])
        return {
            "graph": name,
            "where": "dyngen",
            "dyngen_ops": r.dyngen_ops,
            "aten_ops": 0,
            "rng_draws": r.rng_draws,
            "host_reads": r.host_reads,
            "fn": r.fn,
            "regions": r.regions,
            "reason": "",
        }
    if r.regions == 0:
        return {
            "graph": name,
            "where": "aten",
            "dyngen_ops": 0,
            "aten_ops": r.aten_ops,
            "fn": r.fn,
            "reason": why,
        }
    return {
        "graph": name,
        "where": "partial",
        "dyngen_ops": r.dyngen_ops,
        "aten_ops": r.aten_ops,
        "fn": r.fn,
        "regions": r.regions,
        "reason": f"partly compiled by dyngen ({r.regions} regions, {r.dyngen_ops} ops); "
        f"{r.aten_ops} ops run as ATen: {why}",
    }


def compile_dynamic(
    gm: torch.fx.GraphModule, example_inputs, name: str = "graph", report=None, prebuild_archs=None
):
    """AOTAutograd over a Dynamo graph with dyngen as forward, backward and inference compiler;
    `report(part)` receives each ATen graph's outcome when it is compiled (the backward's lazily,
    at the first backward). `prebuild_archs`: runtime.compile_ir (captured here: the backward
    compiles later)."""
    p = prebuild_archs

    def trace():
        return aot_module_simplified(
            gm,
            example_inputs,
            fw_compiler=lambda g, i: _compile_or_eager(g, i, f"{name}.forward", report, p),
            bw_compiler=lambda g, i: _compile_or_eager(g, i, f"{name}.backward", report, p),
            inference_compiler=lambda g, i: _compile_or_eager(g, i, f"{name}.inference", report, p),
            decompositions=DECOMPOSITIONS,
            keep_inference_input_mutations=True,
        )

    try:
        return trace()
    except DataDependentOutputException:
        env = getattr(detect_fake_mode(example_inputs), "shape_env", None)
        if env is None:
            raise
    # Note [Sizes read from tensors]
    # A size taken from a tensor's value (Phi-3.5-MoE's rotary embedding: arange(seq_len) with
    # seq_len the 0-d tensor cache_position[-1] + 1) makes tracing fail with FakeTensors, which
    # have no values. Traced again with scalar outputs allowed, the read becomes
    # aten._local_scalar_dense with an unbacked size u0. PyTorch runs that read on the host, as
    # eager's arange(tensor) does; it passes u0 into the dyngen region as a size argument
    # (Note [Partial graphs]), so the graph compiles once for every value.
    old = env.settings
    env.settings = dataclasses.replace(old, allow_scalar_outputs=True)
    try:
        return trace()
    finally:
        env.settings = old


_counter = 0


def backend(gm: torch.fx.GraphModule, example_inputs):
    """A plain `torch.compile` backend: every graph through AOTAutograd and dyngen, no Thunder."""
    global _counter
    _counter += 1
    bump("backend_calls")
    return compile_dynamic(gm, example_inputs, f"graph{_counter - 1}")
