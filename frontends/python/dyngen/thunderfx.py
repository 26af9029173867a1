"""ThunderFX with dyngen: static graphs go to Thunder as before, symbolic ones to dyngen.

    model = dyngen.thunderfx.compile(model)          # like thunder.dynamo.thunderfx(model)
    torch.compile(model, backend=dyngen.thunderfx.backend())
    dyngen.thunderfx.compile(model, prebuild_archs="sm_80,sm_90a")   # also fill the kernel cache
                                                                     # for these GPUs

Note [Which graphs are dynamic]
A Dynamo graph is dynamic when a placeholder is a SymInt or a tensor with a SymInt dim (Thunder's
own test, `is_dynamic_inputs`). With Dynamo's default "automatic dynamic" shapes the first call of
a frame is compiled static (so Thunder compiles it once), and the first call with a different size
recompiles the frame with that dim symbolic (dyngen compiles it once, for every later size).
`torch.compile(dynamic=True)` or `torch._dynamo.mark_dynamic` make it symbolic from the first
call; `dynamic=False` never does (then every size is a new static graph for Thunder, as stock).
Sizes 0 and 1 are specialized by Dynamo into static graphs of their own.

Note [Thunder transforms list]
ThunderCompiler appends its prologue transform to the `transforms` list in its options each time
it compiles a graph, so a list the caller passed would grow by one per graph and be shared by all.
The backend keeps the caller's list and gives ThunderCompiler a fresh copy before each graph.
"""
from __future__ import annotations

import inspect

import torch
from torch.utils import _pytree as pytree

from .stats import bump, count_thunder_cache_misses, record_fallback, register_thunder_compiler
from .aot import compile_dynamic
from .errors import FallbackError
from .cache import check_archs
from .options import log


def is_dynamic(example_inputs) -> bool:
    """Note [Which graphs are dynamic]."""
    for a in pytree.tree_flatten(list(example_inputs))[0]:
        if isinstance(a, torch.SymInt):
            return True
        if isinstance(a, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in a.shape):
            return True
    return False


class Backend:
    """A `torch.compile` backend: dynamic graphs -> dyngen (AOTAutograd), static -> Thunder."""

    def __init__(self, **thunder_options):
        # Note [Prebuilding for other GPUs] (cache.py); None: DYNGEN_PREBUILD_ARCHS.
        archs = thunder_options.pop("prebuild_archs", None)
        self.prebuild_archs = None if archs is None else check_archs(archs)
        self._user_transforms = thunder_options.pop("transforms", None)
        self.thunder_options = thunder_options
        self._thunder = None
        self.graphs: list[dict] = []  # {"graph", "kind": "dyngen"|"thunder"|"eager", "reason"}

    @property
    def thunder_compiler(self):
        if self._thunder is None:
            from thunder.dynamo import ThunderCompiler

            self._thunder = ThunderCompiler(**self.thunder_options)
            register_thunder_compiler(self._thunder)
        return self._thunder

    def thunder_cache_misses(self) -> int:
        return count_thunder_cache_misses(self._thunder) if self._thunder else 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs, **compile_options):
        name = f"graph{len(self.graphs)}"
        bump("backend_calls")
        if is_dynamic(example_inputs):
            bump("dynamic_graphs")
            try:
                fn = compile_dynamic(gm, example_inputs, name, prebuild_archs=self.prebuild_archs)
            except FallbackError:  # DYNGEN_STRICT=1 (Note [No silent fallbacks])
                raise
            except Exception as e:  # noqa: BLE001 - dyngen never makes a graph fail
                reason = f"{type(e).__name__}: {e}"
                record_fallback(name, reason)
                self.graphs.append({"graph": name, "kind": "eager", "reason": reason})
                return gm.forward
            log.info("%s: symbolic shapes, compiled by dyngen", name)
            self.graphs.append({"graph": name, "kind": "dyngen", "reason": ""})
            return fn
        bump("static_graphs")
        tc = self.thunder_compiler
        if self._user_transforms is not None:  # Note [Thunder transforms list]
            tc.thunder_options["transforms"] = list(self._user_transforms)
        log.info("%s: static shapes, compiled by Thunder", name)
        self.graphs.append({"graph": name, "kind": "thunder", "reason": ""})
        return tc(gm, example_inputs, **compile_options)


def backend(**thunder_options) -> Backend:
    """The backend for `torch.compile(model, backend=dyngen.thunderfx.backend(...))`."""
    return Backend(**thunder_options)


class Compiled:
    """What `compile` returns: calls the torch.compile'd callable; `.backend` holds the Backend."""

    def __init__(self, backend: Backend, fn):
        self.backend = backend
        self._fn = fn

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._fn, name)


def compile(fn, /, **options) -> Compiled:  # noqa: A001 - mirrors torch.compile / thunderfx
    """`thunder.dynamo.thunderfx` with dyngen: torch.compile options (dynamic=, fullgraph=, ...)
    go to torch.compile, the rest to thunder.jit for the static graphs."""
    names = set(inspect.getfullargspec(inspect.unwrap(torch.compile)).kwonlyargs) - {"backend"}
    compile_kwargs = {k: v for k, v in options.items() if k in names}
    thunder_kwargs = {k: v for k, v in options.items() if k not in names}
    b = Backend(**thunder_kwargs)
    return Compiled(b, torch.compile(fn, backend=b, **compile_kwargs))
