"""The executor seam: an exported graph -> a GraphRunner that runs it for any symbol values.

Note [Executor choice]
Two implementations of one interface (GraphRunner, graph_runner.py):
  "capi"       the C executor: libdyngen.so through ctypes (native.py over core/capi.py): the C
               core verifies, compiles (NVRTC or the host compiler), caches in memory and on
               disk, and launches. A built graph is compiled from its dg_graph handle.
  "reference"  the ATen executor, a PyTorch interpreter of a built graph (aten_executor.py): the
               node list GraphBuilder recorded as it forwarded each op to the core, run with ATen
               ops one by one and checked against the types the core inferred; no code
               generation, still one compile for every size. It is the production CPU executor,
               not the numerics checker of runtime/reference/; its kind keeps the name users
               select it by (DYNGEN_EXECUTOR=reference, stats()["executor"]).
The executor follows the tensors (the device of the graph's example inputs):
  CUDA tensors  the generated kernels ("capi", target cuda:N);
  CPU tensors   the ATen executor by default, since the host emulation of the CUDA kernels
                is far slower than eager there; DYNGEN_EXECUTOR=emulate runs the generated kernels
                under host emulation ("capi", target host), as `dyngen run` and the kernel tests
                do; DYNGEN_TEST_DRIVER_DOUBLE=1 (tests) sends them down the GPU path through the
                driver double.
DYNGEN_EXECUTOR=reference forces the ATen executor everywhere; DYNGEN_TARGET forces a target.
Graphs are built through libdyngen.so (Note [One IR] in core/ir.py), so both executors need it: a
missing library is reported (LibraryNotFound) when the first graph is built. A graph given as IR
text (compile_text) is parsed by the core and has no Python node list: it runs on the C executor
(host emulation for CPU tensors), and DYNGEN_EXECUTOR=reference refuses it.
`dyngen.stats()["executor"]` names what the compiled graphs run on (executor_name): "reference",
"emulate" (the generated kernels under host emulation) or "cuda" (the generated kernels on a GPU,
or through the driver double standing in for one), joined with "+" when graphs of one process ran
on several; before any compile, what CPU tensors would use. Both bind symbols from the inputs'
shapes.
"""

from __future__ import annotations

import hashlib
import os
import threading

import torch

from ..core import capi
from ..core.ir import Graph
from ..counters import bump, dump_stem, note_executor
from ..options import log, options
from .aten_executor import AtenGraphRunner
from .cache import prebuild
from .graph_runner import GraphRunner
from .native import CapiGraphRunner

_kind: str | None = None
_lock = threading.Lock()
_memory: dict[str, GraphRunner] = {}


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


def executor_name(kind: str, target: str | None) -> str:
    """stats()["executor"]'s word for an (executor, C target) plan: Note [Executor choice]."""
    if kind == "reference":
        return "reference"
    return "emulate" if target == "host" else "cuda"


def executor_kind() -> str:
    """What CPU tensors run on, "capi" or "reference" (Note [Executor choice]); stats()
    ["executor"] says more (executor_name)."""
    global _kind
    if _kind is None:
        if options().executor not in ("", "reference", "emulate", "capi"):
            raise ValueError(
                f"DYNGEN_EXECUTOR={options().executor!r}: expected 'reference' or "
                "'emulate' (Note [Executor choice])"
            )
        capi.load()  # raises LibraryNotFound: graphs are built through it (Note [One IR])
        _kind = plan_for(None)[0]
    return _kind


def compile_ir(
    graph: Graph, name: str = "graph", *, device=None, prebuild_archs=None
) -> GraphRunner:
    """Compiles (or fetches) the GraphRunner for a built graph, for tensors on `device` (None: the
    CPU). `prebuild_archs` (default: DYNGEN_PREBUILD_ARCHS): also compile the graph for these
    archs into the kernel cache, whatever runs it here (Note [Prebuilding for other GPUs] in
    cache.py)."""
    kind, target = plan_for(device)
    executor_kind()
    note_executor(executor_name(kind, target))
    if kind == "capi":
        exe = _compile_capi(graph, name, target, device)
        _prebuild(graph, name, prebuild_archs)
        return exe
    if graph.nodes is None:  # parsed by the core, not built here (GraphBuilder.from_text)
        raise ValueError(
            f"{name}: the ATen executor runs graphs built by GraphBuilder; "
            "this one was parsed by the core and has no node list"
        )
    _prebuild(graph, name, prebuild_archs)
    key = hashlib.sha256(graph.text.encode()).hexdigest()
    with _lock:
        exe = _memory.get(key)
        bump("graphs_compiled")
        if exe is not None:
            bump("cache_hits_memory")
            log.info("%s: memory cache hit (key %s)", name, key[:12])
            return exe
    exe = AtenGraphRunner(graph, key)
    with _lock:
        _memory[key] = exe
    log.info("compiled %s with the ATen executor (key %s)", name, key[:12])
    return exe


def _prebuild(graph: Graph, name: str, prebuild_archs) -> None:
    archs = options().prebuild_archs if prebuild_archs is None else prebuild_archs
    if archs:
        prebuild(graph, name, archs)


def compile_text(text: str, name: str = "graph", device=None, prebuild_archs=None) -> GraphRunner:
    """compile_ir for a graph given in the IR text form, parsed by the core. It has no Python
    node list, so it runs on the C executor: CPU tensors under host emulation unless the plan
    names a target (Note [Executor choice])."""
    kind, target = plan_for(device)
    executor_kind()
    if kind == "reference":
        if options().executor == "reference":
            raise ValueError(
                f"{name}: DYNGEN_EXECUTOR=reference runs graphs built by "
                "GraphBuilder; a graph given as text runs on the C executor"
            )
        target = options().target or "host"
    note_executor(executor_name("capi", target))
    exe = _compile_capi(text, name, target, device)
    archs = options().prebuild_archs if prebuild_archs is None else prebuild_archs
    if archs:
        prebuild(text, name, archs)
    return exe


def _compile_capi(source: Graph | str, name: str, target: str, device) -> GraphRunner:
    """A CapiGraphRunner for a built graph (compiled from its handle) or the IR text."""
    emit_dir = None
    if options().dump_dir:  # the core's files for this graph, next to counters.dump's
        text = source.text if isinstance(source, Graph) else source
        emit_dir = os.path.join(options().dump_dir, dump_stem(name, text))
    emulation = None
    if (
        options().driver_double
        and target == "cuda:0"
        and (device is None or torch.device(device).type == "cpu")
    ):
        # The double runs each kernel with the host module of the same source, which must be
        # loaded in this process (Note [How the double runs a kernel]); its devices are sm_90a,
        # whose source has the wgmma kernels (tests/driver_double/double_test_util.cc).
        emulation = CapiGraphRunner(source, target="host", source_arch="sm_90a")
    exe = CapiGraphRunner(
        source, target=target, emit_dir=emit_dir, host_memory_as_device=emulation is not None
    )
    exe._emulation = emulation
    log.info("compiled %s with the C executor for %s (key %s)", name, target, exe.key[:12])
    return exe


def capi_stats() -> dict | None:
    """The C library's counters once it is loaded (executor_kind loads it): whatever CPU tensors
    use, CUDA tensors and graphs given as text run on the C executor."""
    if _kind is None:
        return None
    return capi.get_stats()


def reset_capi_stats() -> None:
    if _kind is not None:
        capi.reset_stats()
