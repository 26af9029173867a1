"""The executor seam: an exported graph's text -> an Executable that runs it for any symbol values.

Note [Executor choice]
Two implementations of one interface:
  "capi"       libdyngen.so through ctypes (_capi.py): the C core verifies, compiles (NVRTC or the
               host compiler), caches in memory and on disk, and launches.
  "reference"  a PyTorch interpreter of the IR (reference.py): no code generation, ATen ops one
               by one; still one compile for every size.
The executor follows the tensors (the device of the graph's example inputs):
  CUDA tensors  the generated kernels ("capi", target cuda:N);
  CPU tensors   the reference executor by default, since the host emulation of the CUDA kernels
                is far slower than eager there; DYNGEN_EXECUTOR=emulate runs the generated kernels
                under host emulation ("capi", target host), as `dyngen run` and the kernel tests
                do; DYNGEN_TEST_DRIVER_DOUBLE=1 (tests) sends them down the GPU path through the
                driver double.
DYNGEN_EXECUTOR=reference forces the reference executor everywhere; DYNGEN_TARGET forces a target.
When the C library cannot load where it is needed, the graph runs on the reference executor and
that is a fallback (Note [No silent fallbacks]): warned once, or raised under DYNGEN_STRICT=1.
`dyngen.stats()["executor"]` reports what CPU tensors use. "capi" sends graph.fb bytes
(fb_writer.py, dg_graph_load), "reference" interprets the graph. Both bind symbols from the
inputs' shapes.
"""
from __future__ import annotations

import abc
import hashlib
import os
import threading

import torch

from .stats import bump, dump_stem, record_fallback, set_executor
from .errors import LaunchError
from .ir import Graph
from .options import log, options
from .ops import DType
from .symbolic import bound_str


class Executable(abc.ABC):
    """One compiled graph. Inputs are in IR input order: contiguous tensors, and Python ints for
    `input %n: sym ...` values; outputs are new contiguous tensors in IR output order."""

    kind: str = ""
    key: str = ""

    @abc.abstractmethod
    def prepare(self, inputs: list) -> list[tuple[tuple[int, ...], torch.dtype]]:
        """Binds the symbols from the inputs (checking them) and returns each output's
        (shape, dtype)."""

    @abc.abstractmethod
    def run(self, inputs: list) -> list[torch.Tensor]:
        """Computes the outputs (allocated with torch on the inputs' device)."""


def bind_symbols(g: Graph, inputs: list) -> dict[str, int]:
    """Binds each symbol at its first sight as a whole dim (or sym input) and checks every other
    dim, dtype and rank; raises LaunchError on a mismatch (the rules of dg_prepare)."""
    if len(inputs) != len(g.inputs):
        raise LaunchError(f"expected {len(g.inputs)} inputs, got {len(inputs)}")
    bind: dict[str, int] = {}
    later = []
    for k, (vid, x) in enumerate(zip(g.inputs, inputs)):
        v = g.values[vid]
        if v.is_sym:
            later.append((k, None, v.sym, int(x)))
            if v.sym.is_symbol():
                _bind_one(bind, v.sym, int(x), k)
            continue
        if not isinstance(x, torch.Tensor):
            raise LaunchError(f"input {k}: expected a tensor, got {type(x).__name__}")
        t = v.type
        if x.dim() != t.rank or DType.from_torch(x.dtype) != t.dtype:
            raise LaunchError(f"input {k}: expected {t}, got {x.dtype}{list(x.shape)}")
        for d, (e, n) in enumerate(zip(t.shape, x.shape)):
            if e.is_symbol():
                _bind_one(bind, e, n, k)
            later.append((k, d, e, n))
    for k, d, e, n in later:
        got = e.evaluate(bind)
        if got != n:
            where = f"dim {d}" if d is not None else "value"
            raise LaunchError(f"input {k} {where}: expected {e} = {got}, got {n}")
    return bind


def _bind_one(bind: dict, s, n: int, k: int) -> None:
    if s.name in bind:
        return
    lo, hi = s.range
    if not lo <= n <= hi or n % s.symbol_divisor:
        raise LaunchError(f"input {k}: {s.name} = {n} is outside its facts "
                          f"[{bound_str(lo)}, {bound_str(hi)}] div {s.symbol_divisor}")
    bind[s.name] = n


# ---- choosing and caching executables -----------------------------------------------------------

_lock = threading.Lock()
_memory: dict[str, Executable] = {}
_kind: str | None = None
_library_error: str | None = None


def _library_loads() -> bool:
    """Whether libdyngen.so loads (tried once); the error is kept for the fallback message."""
    global _library_error
    from . import _capi
    if _library_error is None:
        try:
            _capi.load()
            _library_error = ""
        except Exception as e:  # noqa: BLE001 - any load failure means "no C executor"
            _library_error = f"{type(e).__name__}: {e}"
    return not _library_error


def plan_for(device=None) -> tuple[str, str | None]:
    """(executor, C target) for tensors on `device` (None: the CPU): Note [Executor choice]."""
    opts = options()
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if opts.executor == "reference":
        return "reference", None
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return "capi", opts.target or f"cuda:{index}"
    if opts.driver_double:
        return "capi", opts.target or "cuda:0"
    if opts.executor in ("emulate", "capi"):
        return "capi", opts.target or "host"
    return "reference", None


def executor_kind() -> str:
    """What CPU tensors run on, "capi" or "reference" (Note [Executor choice])."""
    global _kind
    if _kind is None:
        kind, _ = plan_for(None)
        if kind == "capi" and not _library_loads():
            kind = "reference"
        _kind = kind
        set_executor(_kind)
    return _kind


def compile_ir(graph: Graph, name: str = "graph", *, text: str | None = None,
               fb: bytes | None = None, device=None, prebuild_archs=None) -> Executable:
    """Compiles (or fetches) the executable for an IR graph, for tensors on `device` (None: the
    CPU). `text` and `fb` are the graph's text form and graph.fb bytes when the caller has them.
    `prebuild_archs` (default: DYNGEN_PREBUILD_ARCHS): also compile for these archs into the
    kernel cache (Note [Prebuilding for other GPUs] in cache.py)."""
    kind, target = plan_for(device)
    if kind == "capi" and not _library_loads():
        if options().executor == "emulate":
            from . import _capi
            _capi.load()  # raises LibraryNotFound: emulation was asked for by name
        record_fallback(name, f"libdyngen.so cannot load ({_library_error})",
                        "runs on the reference executor")
        kind = "reference"
    executor_kind()
    archs = options().prebuild_archs if prebuild_archs is None else prebuild_archs
    if kind == "capi":
        from ._capi import CapiExecutable
        from .fb_writer import write_graph_fb
        emit_dir = None
        if options().dump_dir:  # the core's files for this graph, next to stats.dump's
            text = text if text is not None else graph.to_text()
            emit_dir = os.path.join(options().dump_dir, dump_stem(name, text))
        fb = fb if fb is not None else write_graph_fb(graph)
        emulation = None
        if options().driver_double and target == "cuda:0" and (device is None or
                                                                torch.device(device).type == "cpu"):
            # The double runs each kernel with the host module of the same source, which must be
            # loaded in this process (Note [How the double runs a kernel]).
            emulation = CapiExecutable(fb, target="host")
        exe = CapiExecutable(fb, target=target, emit_dir=emit_dir,
                             host_memory_as_device=emulation is not None)
        exe._emulation = emulation
        log.info("compiled %s with the C executor for %s (key %s)", name, target, exe.key[:12])
        if archs:
            from .cache import prebuild
            prebuild(fb, name, archs)
        return exe
    if archs:
        from .cache import prebuild
        prebuild(b"", name, archs)  # warns once: the reference executor has no kernel cache
    text = text if text is not None else graph.to_text()
    key = hashlib.sha256(text.encode()).hexdigest()
    with _lock:
        exe = _memory.get(key)
        bump("graphs_compiled")
        if exe is not None:
            bump("cache_hits_memory")
            log.info("%s: memory cache hit (key %s)", name, key[:12])
            return exe
    from .reference import ReferenceExecutable
    exe = ReferenceExecutable(text, key)
    with _lock:
        _memory[key] = exe
    log.info("compiled %s with the reference executor (key %s)", name, key[:12])
    return exe


def compile_text(text: str, name: str = "graph", device=None) -> Executable:
    """compile_ir for a graph given in the IR text form (parsed here; the C executor still
    receives graph.fb bytes)."""
    from .text import parse_graph_text
    return compile_ir(parse_graph_text(text), name, text=text, device=device)


def capi_stats() -> dict | None:
    if _kind != "capi":
        return None
    from . import _capi
    return _capi.get_stats()


def reset_capi_stats() -> None:
    if _kind == "capi":
        from . import _capi
        _capi.reset_stats()


def clear_memory_cache() -> None:
    with _lock:
        _memory.clear()
