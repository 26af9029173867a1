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
from collections.abc import Callable

import torch
from torch._decomp import get_decompositions
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func
from torch._guards import detect_fake_mode
from torch._subclasses.fake_tensor import DataDependentOutputException

from .compiled import compile_fx_graph
from .core.ir import IRTypeError
from .counters import bump, count_where, record_fallback
from .errors import FallbackError, Unsupported
from .options import log
from .partition import compile_partial
from .pinned import PinnedGraph
from .view_bases import group_select_outputs
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


@dataclasses.dataclass
class _Outcome:
    """How one ATen graph runs (Note [Where graphs and ops ran]) and the callable that runs it.
    `part()` is the record `report(part)` receives: the optional fields appear only when set."""

    graph: str
    where: str  # "dyngen", "partial" or "aten"
    fn: Callable
    dyngen_ops: int = 0
    aten_ops: int = 0
    reason: str = ""
    rng_draws: int | None = None  # random draws PyTorch runs first (Note [Random numbers])
    host_reads: int | None = None  # sizes read from tensors (Note [Sizes read from tensors])
    regions: int | None = None  # dyngen regions of a graph compiled in parts
    pinned: str | None = None  # the symbols pinned (Note [Pinned symbols])

    def part(self) -> dict:
        d = {
            "graph": self.graph,
            "where": self.where,
            "dyngen_ops": self.dyngen_ops,
            "aten_ops": self.aten_ops,
        }
        for key in ("rng_draws", "host_reads", "regions", "pinned"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        d["reason"] = self.reason
        return d


def _as_aten(name: str, gm: torch.fx.GraphModule, aten_ops: int, reason: str, fn=None) -> _Outcome:
    """The graph runs as ATen ops (`fn`, default the graph itself), for `reason`."""
    return _Outcome(name, "aten", gm if fn is None else fn, aten_ops=aten_ops, reason=reason)


def _count_ops(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


def _compile_or_eager(
    gm: torch.fx.GraphModule, example_inputs, name: str, report=None, prebuild_archs=None
):
    """dyngen's GraphRunner for one ATen graph; when the whole graph does not export, dyngen
    compiles the regions it can and PyTorch runs the rest (Note [Partial graphs]); each outcome is
    counted (Note [Where graphs and ops ran]), logged, and passed to `report(part)`.
    `prebuild_archs`: runtime.compile_ir."""
    grouped = group_select_outputs(gm)  # Note [Outputs that slice one intermediate]
    if grouped is not None:
        gm = grouped.gm
    n_ops = _count_ops(gm)
    try:
        fn = compile_fx_graph(gm, example_inputs, name, prebuild_archs=prebuild_archs)
        out = _Outcome(name, "dyngen", fn, dyngen_ops=n_ops)
    except FallbackError:  # DYNGEN_STRICT=1 (Note [No silent fallbacks])
        raise
    except (Unsupported, IRTypeError) as e:
        out = _pinned(gm, example_inputs, name, e, prebuild_archs)
    except Exception as e:  # noqa: BLE001 - an internal error: this graph runs as ATen ops
        out = _as_aten(name, gm, n_ops, f"{type(e).__name__}: {e}")
    count_where(
        out.where,
        dyngen=out.dyngen_ops,
        aten=out.aten_ops,
        rng=out.rng_draws or 0,
        host=out.host_reads or 0,
    )
    if out.where == "dyngen":
        log.info(
            "%s: compiled by dyngen (%d ops; by PyTorch: %d random draws, Note [Random "
            "numbers], %d sizes read from tensors, Note [Sizes read from tensors])",
            name,
            out.dyngen_ops,
            out.rng_draws or 0,
            out.host_reads or 0,
        )
    else:
        record_fallback(
            name,
            out.reason,
            what="runs in part as ATen ops" if out.where == "partial" else "runs eagerly",
        )
        log.debug("ATen graph for %s:\n%s", name, gm.code)
    if report is not None:
        report(out.part())
    fn = with_true_views(gm, out.fn)  # Note [Outputs that are views]
    return make_boxed_func(grouped.wrap(fn) if grouped is not None else fn)


def _pinned(gm, example_inputs, name: str, error: Exception, prebuild_archs) -> _Outcome:
    """The graph under Dynamo's guards and pinned symbols (Note [Pinned symbols]); when that does
    not export either, in parts (an Unsupported op) or as ATen ops (an IR typing error)."""
    n_ops = _count_ops(gm)

    def without_pins() -> _Outcome:
        if isinstance(error, Unsupported):
            return _partial(gm, name, str(error))
        return _as_aten(name, gm, n_ops, f"{type(error).__name__}: {error}")

    try:
        fn = PinnedGraph(gm, example_inputs, name, prebuild_archs, lambda: without_pins().fn)
    except FallbackError:
        raise
    except Exception as e:  # noqa: BLE001 - the symbolic failure stands
        log.debug("%s: pinning symbols did not help: %s: %s", name, type(e).__name__, e)
        return without_pins()
    pins = ", ".join(str(s) for s in fn.pinned) or "none"
    return _Outcome(name, "dyngen", fn, dyngen_ops=n_ops, pinned=pins)


def _partial(gm: torch.fx.GraphModule, name: str, whole_reason: str) -> _Outcome:
    try:
        r = compile_partial(gm, name)
    except Exception as e:  # noqa: BLE001 - partitioning failed: the graph runs as ATen ops
        reason = f"{whole_reason}; partitioning failed: {type(e).__name__}: {e}"
        return _as_aten(name, gm, _count_ops(gm), reason)
    why = "; ".join(f"{op}: {msg}" for op, msg in r.aten_reasons.items()) or whole_reason
    if r.regions and not r.aten_reasons:  # dyngen runs all but the draws (Note [Random numbers])
        return _Outcome(
            name,
            "dyngen",
            r.fn,
            dyngen_ops=r.dyngen_ops,
            rng_draws=r.rng_draws,
            host_reads=r.host_reads,
            regions=r.regions,
        )
    if r.regions == 0:
        return _as_aten(name, gm, r.aten_ops, why, fn=r.fn)
    return _Outcome(
        name,
        "partial",
        r.fn,
        dyngen_ops=r.dyngen_ops,
        aten_ops=r.aten_ops,
        regions=r.regions,
        reason=f"partly compiled by dyngen ({r.regions} regions, {r.dyngen_ops} ops); "
        f"{r.aten_ops} ops run as ATen: {why}",
    )


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
