"""Counters: what dyngen compiled, what it took from a cache, what ran eagerly and why.

A leaf of the package (it imports only errors and options): every layer counts here, and
report.py turns the counters into `dyngen.stats()`, adding the C library's own counters and
Thunder's cache misses.
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
import weakref
from dataclasses import dataclass, field

from .errors import FallbackError, FallbackWarning
from .options import log, options

# Note [Where graphs and ops ran]
# graphs_where counts, per place: "dyngen" ATen graphs (an AOTAutograd forward, backward or
# inference graph) dyngen compiled whole; "partial" ATen graphs dyngen compiled in regions with the
# rest run as ATen ops (partition.py, Note [Partial graphs]); "aten" ATen graphs that ran whole as
# ATen ops; "thunder" Dynamo graphs Thunder ran (counted at their first call, once their outputs
# passed the check of Note [When Thunder fails]); "eager" Dynamo graphs that ran eagerly because
# Thunder (or AOTAutograd) failed on them. ops_where counts the call nodes of those graphs the
# same way ("dyngen": inside dyngen's executables, "aten": run by PyTorch inside dyngen's graphs,
# "thunder" and "eager": nodes of the Dynamo graphs given to Thunder or run eagerly; "rng": random
# draws PyTorch's generator makes ahead of a dyngen graph, Note [Random numbers]; "host": sizes
# PyTorch reads from tensors for a dyngen graph, Note [Sizes read from tensors] in aot.py). Both are
# counted when a graph is compiled (Thunder's: first run), once per graph, not per call.
GRAPH_PLACES = ("dyngen", "partial", "aten", "thunder", "eager")
OP_PLACES = ("dyngen", "aten", "thunder", "eager", "rng", "host")


@dataclass
class _Counters:
    graphs_compiled: int = 0  # compile calls that produced an executable (cache hits included)
    nvrtc_compiles: int = 0  # real code generations (NVRTC or the host compiler)
    cache_hits_memory: int = 0
    cache_hits_disk: int = 0
    exported_graphs: int = 0  # FX graphs exported to the IR (forward and backward count apart)
    # Dynamo graphs given to dyngen: symbolic shapes, or static ones holding dyngen ops
    # (Note [Graphs holding dyngen ops])
    dynamic_graphs: int = 0
    static_graphs: int = 0  # Dynamo graphs with static shapes given to Thunder
    backend_calls: int = 0  # every Dynamo graph the backend saw (= Dynamo compiles)
    prebuild_compiled: int = 0  # binaries compiled for DYNGEN_PREBUILD_ARCHS (executors/cache.py)
    prebuild_cached: int = 0  # ... found already in the cache
    prebuild_failed: int = 0
    fallbacks: list = field(default_factory=list)
    # Counted per place (Note [Where graphs and ops ran]).
    graphs_where: dict = field(default_factory=lambda: dict.fromkeys(GRAPH_PLACES, 0))
    ops_where: dict = field(default_factory=lambda: dict.fromkeys(OP_PLACES, 0))


_lock = threading.Lock()
_c = _Counters()
# Thunder's miss counters live on its compiled functions; reset_stats() records each backend's
# count at the reset and stats() reports what came after.
_thunder_compilers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def bump(name: str, n: int = 1) -> None:
    with _lock:
        setattr(_c, name, getattr(_c, name) + n)


def count_where(graph_place: str, **ops) -> None:
    """One graph ran at `graph_place`, with ops[place] of its call nodes at each place."""
    with _lock:
        _c.graphs_where[graph_place] += 1
        for place, n in ops.items():
            _c.ops_where[place] += n


# (graph, reason) pairs already warned about: Note [No silent fallbacks].
_warned: set = set()


def record_fallback(graph: str, reason: str, what: str = "runs eagerly") -> None:
    """Note [No silent fallbacks]
    Every place where dyngen does not run what was asked (a graph left to eager PyTorch, the C
    library that cannot load) comes here. The fallback is counted in stats()["fallbacks"] and
    warned about once per graph and reason (a FallbackWarning); with DYNGEN_STRICT=1 it raises
    FallbackError instead, so a test cannot pass by comparing torch with torch."""
    message = f"dyngen: {graph} {what}: {reason}"
    if options().strict:
        raise FallbackError(message + " (DYNGEN_STRICT=1)")
    with _lock:
        _c.fallbacks.append({"graph": graph, "reason": reason})
        first = (graph, reason) not in _warned
        _warned.add((graph, reason))
    log.info("fallback: %s %s: %s", graph, what, reason)
    if first:
        warnings.warn(message, FallbackWarning, stacklevel=2)


# What the graphs compiled in this process run on (runtime.executor_name): stats() joins them.
# Not a counter: reset_stats() keeps it, since the graphs compiled before a reset still run.
_executors: list = []


def note_executor(name: str) -> None:
    with _lock:
        if name not in _executors:
            _executors.append(name)


# The MoE blocks dyngen.thunderfx.compile met (moe/adapters.py), by module name: the route each
# takes ("grouped", or "loop" with the reason). Not a counter either: reset_stats() keeps it.
_moe_blocks: dict = {}


def note_moe_block(name: str, cls: str, why_not: str) -> None:
    """Block `name` (class `cls`) runs grouped experts when `why_not` is "", else its own loop."""
    with _lock:
        _moe_blocks[name] = {"class": cls, "route": "loop" if why_not else "grouped"}
        if why_not:
            _moe_blocks[name]["reason"] = why_not


# The process-wide shims in place (shims.py), by name; kept by reset_stats() like _moe_blocks.
_shims: list = []


def note_shims(names) -> None:
    with _lock:
        _shims[:] = list(names)


def register_thunder_compiler(tc) -> None:
    _thunder_compilers[tc] = 0


def thunder_cache_misses() -> int:
    """Summed `thunder.cache_misses` over every function Thunder compiled for a live backend."""
    return sum(
        count_thunder_cache_misses(tc) - base for tc, base in list(_thunder_compilers.items())
    )


def count_thunder_cache_misses(tc) -> int:
    """Cache misses of the Thunder-compiled functions of one ThunderCompiler."""
    import thunder

    total = 0
    for info in getattr(tc, "subgraph_infos", []):
        for fn in info.thunder_compiled_fns or []:
            total += thunder.cache_misses(fn)
    return total


def snapshot() -> tuple[dict, str]:
    """(a copy of the counters, the executors joined with "+") for report.stats()."""
    with _lock:
        d = {
            k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
            for k, v in _c.__dict__.items()
        }
        d["moe_blocks"] = {k: dict(v) for k, v in _moe_blocks.items()}
        d["shims"] = list(_shims)
        return d, "+".join(sorted(_executors))


def reset() -> None:
    """Zeroes every counter and records each live ThunderFX backend's Thunder misses so far, so
    that thunder_cache_misses() reports what comes after."""
    global _c
    for tc in list(_thunder_compilers.keys()):
        _thunder_compilers[tc] = count_thunder_cache_misses(tc)
    with _lock:
        _c = _Counters()


def dump_stem(name: str, text: str) -> str:
    """`<name>-<first 12 hex digits of the text's sha256>`: the file names of one graph's dump."""
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def dump(name: str, text: str, fb: bytes | None = None) -> None:
    """DYNGEN_DUMP=DIR: writes the exported graph as DIR/<stem>.fb (graph.fb, for `dyngen compile`)
    and DIR/<stem>.dgir (its IR text form, for reading); the C executor has the core write its IR
    after each pass and the generated source under DIR/<stem>/ (stem: dump_stem)."""
    d = options().dump_dir
    if not d:
        return
    os.makedirs(d, exist_ok=True)
    base = os.path.join(d, dump_stem(name, text))
    with open(base + ".dgir", "w") as f:
        f.write(text)
    if fb:  # a graph without outputs has no graph.fb (GraphBuilder.finish)
        with open(base + ".fb", "wb") as f:
            f.write(fb)
    log.debug("dumped %s.dgir/.fb", base)
