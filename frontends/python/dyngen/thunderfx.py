"""ThunderFX with dyngen: static graphs go to Thunder as before, symbolic ones to dyngen.

    model = dyngen.thunderfx.compile(model)          # like thunder.dynamo.thunderfx(model)
    torch.compile(model, backend=dyngen.thunderfx.backend())
    dyngen.thunderfx.compile(model, prebuild_archs="sm_80,sm_90a")   # also fill the kernel cache
                                                                     # for these GPUs

`compile` returns a `thunder.dynamo.ThunderFXCompiledObject` (`_backend`, `last_traces`, ...), and
the backend is a `thunder.dynamo.ThunderCompiler` subclass, so Thunder's reporting tools
(`subgraph_infos`, `save_reproducer_to_folder`, `thunder.dynamo.report`) see the graphs Thunder
compiled; `backend.graphs` lists every Dynamo graph with where it went and why.

Note [Which graphs are dynamic]
A Dynamo graph is dynamic when a placeholder is a SymInt or a tensor with a SymInt dim (Thunder's
own test, `is_dynamic_inputs`), or when a node inside it has a symbolic value (a size read from a
tensor, `arange(t)`, with no symbolic placeholder). With Dynamo's default "automatic dynamic" shapes
the first call of a frame is compiled static (so Thunder compiles it once), and the first call with
a different size recompiles the frame with that dim symbolic (dyngen compiles it once, for every
later size). `torch.compile(dynamic=True)` or `torch._dynamo.mark_dynamic` make it symbolic from the
first call; `dynamic=False` never does (then every size is a new static graph for Thunder, as
stock). Sizes 0 and 1 are specialized by Dynamo into static graphs of their own.

Note [Thunder transforms list]
ThunderCompiler appends its prologue transform to the `transforms` list in its options each time
it compiles a graph, so a list the caller passed would grow by one per graph and be shared by all.
The backend keeps the caller's list and gives ThunderCompiler a fresh copy before each graph.

Note [When Thunder fails]
A static graph that Thunder cannot split or compile (its splitter raises at compile time, its
trace raises at the first call, or its first call returns outputs whose shapes or dtypes differ
from Dynamo's) is compiled by dyngen instead, through AOTAutograd as a dynamic graph is (static
sizes are a special case of symbolic ones), with a warning naming Thunder's failure. Only when
dyngen fails too does it run eagerly, with a recorded fallback (counters.record_fallback);
either way the training step goes on. Thunder's failed first call may have drawn random numbers
before it failed (Phi-3.5-MoE's input jitter: two `uniform_` draws, then the router's in-place
op on a leaf raises), so the generators' states are taken before that call and put back before
the graph runs again: the run that counts draws what eager would, and losses stay step for step
comparable with eager's (the stream ran 2900 words ahead from step 0 on before).

Note [Graphs holding dyngen ops]
A Dynamo graph holding a `torch.ops.dyngen.*` primitive (the grouped experts of moe/, Note [MoE
block adapters]) goes to dyngen whether its shapes are static or symbolic: dyngen imports each
primitive as the IR op of the same name, while Thunder would trace into the op's eager body and
fall back to eager at its host reads (`nonzero`, `.tolist()`).

Note [Dynamo restarts]
Two exceptions out of compile_dynamic are not failures and must reach their callers: FallbackError
(DYNGEN_STRICT=1, Note [No silent fallbacks]) and Dynamo's RestartAnalysis. Under dynamic=True a
Python float becomes a SymFloat; AOTAutograd's tensorify pass then raises
TensorifyScalarRestartAnalysis so that Dynamo traces the frame again with the float specialized or
made a tensor, and hands the backend the new graph. Caught here as an error, it turned a graph
that compiles into an eager fallback.
"""

from __future__ import annotations

import torch
from thunder.dynamo import ThunderCompiler, ThunderFXCompiledObject
from torch._dynamo.exc import RestartAnalysis
from torch.utils import _pytree as pytree

from . import graph_check, shims
from .aot import compile_dynamic
from .counters import (
    bump,
    count_thunder_cache_misses,
    count_where,
    record_fallback,
    register_thunder_compiler,
)
from .errors import FallbackError
from .executors.cache import check_archs
from .fx.values import meta_val
from .moe.adapters import GroupedRoute
from .options import log


def _symbolic(v) -> bool:
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return not v.node.expr.is_number
    if isinstance(v, torch.Tensor):
        return any(isinstance(s, torch.SymInt) and not s.node.expr.is_number for s in v.shape)
    return False


def is_dynamic(example_inputs, gm: torch.fx.GraphModule | None = None) -> bool:
    """Note [Which graphs are dynamic]."""
    if any(_symbolic(a) for a in pytree.tree_flatten(list(example_inputs))[0]):
        return True
    if gm is None:
        return False
    return any(_symbolic(v) for n in gm.graph.nodes for v in pytree.tree_flatten(meta_val(n))[0])


def holds_dyngen_op(gm: torch.fx.GraphModule) -> bool:
    """Note [Graphs holding dyngen ops]."""
    for n in gm.graph.nodes:
        t = n.target
        if n.op == "call_function" and isinstance(
            t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)
        ):
            packet = t.overloadpacket if isinstance(t, torch._ops.OpOverload) else t
            if packet._qualified_op_name.startswith("dyngen::"):
                return True
    return False


def _call_nodes(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


class DyngenCompiler(ThunderCompiler):
    """A `torch.compile` backend: dynamic graphs -> dyngen (AOTAutograd), static -> Thunder."""

    def __init__(self, **thunder_options):
        # Note [Prebuilding for other GPUs] (executors/cache.py); None: DYNGEN_PREBUILD_ARCHS.
        archs = thunder_options.pop("prebuild_archs", None)
        self.prebuild_archs = None if archs is None else check_archs(archs)
        self._user_transforms = thunder_options.pop("transforms", None)
        super().__init__(**thunder_options)
        # {"graph", "kind": "dyngen" | "thunder" | "eager" | "retraced", "reason", "parts": [...]}:
        # one per Dynamo graph ("retraced": Note [Dynamo restarts]); "parts" are dyngen's ATen
        # graphs (forward, backward) with their outcome.
        self.graphs: list[dict] = []
        register_thunder_compiler(self)

    def thunder_cache_misses(self) -> int:
        return count_thunder_cache_misses(self)

    def __call__(self, gm: torch.fx.GraphModule, sample_args, **compile_options):
        name = f"graph{len(self.graphs)}"
        bump("backend_calls")
        if is_dynamic(sample_args, gm):
            fn = self._dyngen(gm, sample_args, name)
        elif holds_dyngen_op(gm):  # Note [Graphs holding dyngen ops]
            fn = self._dyngen(gm, sample_args, name, reason="holds dyngen ops")
        else:
            fn = self._thunder(gm, sample_args, name, **compile_options)
        return graph_check.wrap(name, gm, fn)  # Note [Checking graphs against eager]

    def _compile_dynamic(self, gm, sample_args, rec):
        """dyngen's AOTAutograd compile of one Dynamo graph, its parts reported into `rec`."""
        return compile_dynamic(
            gm,
            sample_args,
            rec["graph"],
            report=rec["parts"].append,
            prebuild_archs=self.prebuild_archs,
        )

    def _dyngen(self, gm, sample_args, name, reason="symbolic shapes"):
        bump("dynamic_graphs")
        rec = {"graph": name, "kind": "dyngen", "reason": reason, "parts": []}
        self.graphs.append(rec)
        try:
            fn = self._compile_dynamic(gm, sample_args, rec)
        except RestartAnalysis as e:  # Note [Dynamo restarts]
            rec.update(kind="retraced", reason=f"Dynamo traces it again: {type(e).__name__}")
            log.info("%s: %s", name, rec["reason"])
            raise
        except FallbackError:  # DYNGEN_STRICT=1 (Note [No silent fallbacks])
            raise
        except Exception as e:  # noqa: BLE001 - AOTAutograd failed: the graph runs eagerly
            reason = f"{type(e).__name__}: {e}"
            record_fallback(name, reason)
            count_where("eager", eager=_call_nodes(gm))
            rec.update(kind="eager", reason=reason)
            return gm.forward
        log.info("%s: %s, given to dyngen through AOTAutograd", name, reason)
        return fn

    def _thunder(self, gm, sample_args, name, **compile_options):
        bump("static_graphs")
        rec = {"graph": name, "kind": "thunder", "reason": "static shapes", "parts": []}
        self.graphs.append(rec)
        if self._user_transforms is not None:  # Note [Thunder transforms list]
            self.thunder_options["transforms"] = list(self._user_transforms)
        n_infos = len(self.subgraph_infos)
        try:
            split = super().__call__(gm, sample_args, **compile_options)
        except Exception as e:  # noqa: BLE001 - Note [When Thunder fails]
            del self.subgraph_infos[n_infos:]
            return self._instead(
                gm, sample_args, rec, f"Thunder could not split it: {type(e).__name__}: {e}"
            )
        log.info("%s: static shapes, given to Thunder", name)
        return _GuardedThunder(self, gm, split, rec)

    def _instead(self, gm, sample_args, rec, reason):
        """Note [When Thunder fails]: dyngen compiles the graph Thunder failed on; eager PyTorch
        runs it when dyngen fails too."""
        name = rec["graph"]
        try:
            fn = self._compile_dynamic(gm, sample_args, rec)
        except (FallbackError, RestartAnalysis):  # Note [Dynamo restarts]
            raise
        except Exception as e:  # noqa: BLE001
            return self._eager(gm, rec, f"{reason}; dyngen failed too: {type(e).__name__}: {e}")
        log.warning("dyngen: %s: %s; compiled by dyngen instead", name, reason)
        rec.update(kind="dyngen", reason=f"{reason}; compiled by dyngen instead")
        return fn

    def _eager(self, gm, rec, reason):
        record_fallback(rec["graph"], reason)
        count_where("eager", eager=_call_nodes(gm))
        rec.update(kind="eager", reason=reason)
        return gm.forward


class _GuardedThunder:
    """Note [When Thunder fails]: Thunder's split module, checked on its first call."""

    def __init__(self, owner: DyngenCompiler, gm, split, rec):
        # No example inputs are kept: Dynamo's are the caller's tensors, which must not outlive
        # the call (Thunder's test_leak_on_unsupported_thunder_operator).
        self.owner, self.gm, self.split, self.rec = owner, gm, split, rec
        self.checked = False
        self.instead = None  # what runs the graph once Thunder failed on it

    def __call__(self, *args):
        if self.instead is not None:
            return self.instead(*args)
        if self.checked:
            return self.split(*args)
        generators = _generator_states()  # Note [When Thunder fails]
        try:
            out = self.split(*args)
        except Exception as e:  # noqa: BLE001
            _restore_generators(generators)
            return self._fall_back(
                args, f"Thunder failed at its first call: {type(e).__name__}: {e}"
            )
        bad = _mismatch(self.gm, out)
        if bad:
            _restore_generators(generators)
            return self._fall_back(args, f"Thunder's outputs differ from Dynamo's: {bad}")
        self.checked = True
        count_where("thunder", thunder=_call_nodes(self.gm))
        return out

    def _fall_back(self, args, reason):
        self.instead = self.owner._instead(self.gm, list(args), self.rec, reason)
        return self.instead(*args)


def _generator_states():
    """The CPU generator's state, and the CUDA generators' when CUDA is in use."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _restore_generators(states) -> None:
    cpu, cuda = states
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _mismatch(gm, out) -> str:
    """The first output whose shape or dtype differs from Dynamo's example value, or ""."""
    want = None
    for n in gm.graph.nodes:
        if n.op == "output":
            want = pytree.tree_flatten(torch.fx.node.map_arg(n.args[0], meta_val))[0]
    got = pytree.tree_flatten(out)[0]
    if want is None or len(want) != len(got):
        return ""
    for i, (w, g) in enumerate(zip(want, got)):
        if isinstance(w, torch.Tensor) and isinstance(g, torch.Tensor):
            if tuple(w.shape) != tuple(g.shape) or w.dtype != g.dtype:
                return (
                    f"output {i}: {g.dtype}{list(g.shape)}, Dynamo expects {w.dtype}{list(w.shape)}"
                )
    return ""


Backend = DyngenCompiler


def backend(**thunder_options) -> DyngenCompiler:
    """The backend for `torch.compile(model, backend=dyngen.thunderfx.backend(...))`."""
    return DyngenCompiler(**thunder_options)


class Compiled(ThunderFXCompiledObject):
    """What `compile` returns: Thunder's ThunderFXCompiledObject over dyngen's backend
    (`.backend` is `._backend`)."""

    @property
    def backend(self) -> DyngenCompiler:
        return self._backend

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._func, name)


def compile(fn, /, *, moe: str = "grouped", **options) -> Compiled:  # noqa: A001 - as thunderfx
    """`thunder.dynamo.thunderfx` with dyngen: torch.compile options (dynamic=, fullgraph=, ...)
    go to torch.compile, the rest to thunder.jit for the static graphs. `moe="grouped"` (the
    default) switches the MoE blocks of a model it recognizes to grouped experts (Note [MoE block
    adapters]; `.moe_route.undo()` switches them back); `moe="loop"` keeps the models' expert
    loops, for an A/B run; `dyngen.stats()["moe_blocks"]` says which route each block takes and
    why."""
    from thunder.dynamo.utils import get_torch_compile_kwargs

    if moe not in ("grouped", "loop"):
        raise ValueError(f"moe must be 'grouped' or 'loop', got {moe!r}")
    route = GroupedRoute(fn, enabled=moe == "grouped") if isinstance(fn, torch.nn.Module) else None
    shims.install()  # Note [SDPA is_causal under dynamic shapes]

    compile_kwargs = get_torch_compile_kwargs(**options)
    thunder_kwargs = {k: v for k, v in options.items() if k not in compile_kwargs}
    b = DyngenCompiler(**thunder_kwargs)
    compiled = Compiled(b, torch.compile(fn, backend=b, **compile_kwargs))
    compiled.moe_route = route
    return compiled
