"""The executor seam: an exported graph -> an Executable that runs it for any symbol values.

Note [Executor choice]
Graphs run through libdyngen.so (_capi.py): the C core verifies, compiles (NVRTC or the host
compiler), caches in memory and on disk, and launches. Since the frontend builds its graphs
through the same library (Note [One IR] in ir.py), there is no executor without it: a missing
library is reported (LibraryNotFound) when the first graph is exported. `dyngen.stats()
["executor"]` reports "capi". DYNGEN_EXECUTOR=reference, the old PyTorch interpreter of the IR
text, is gone with the Python copy of the IR; asking for it is an error.
"""
from __future__ import annotations

import abc
import os

import torch

from .errors import LibraryNotFound
from .ir import Graph
from .options import log, options
from .stats import dump_stem, set_executor


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


_kind: str | None = None


def executor_kind() -> str:
    """Note [Executor choice]."""
    global _kind
    if _kind is None:
        if options().executor not in ("", "capi"):
            raise LibraryNotFound(f"DYNGEN_EXECUTOR={options().executor!r}: the only executor is "
                                  "'capi' (libdyngen.so)")
        from . import _capi
        _capi.load()
        _kind = "capi"
        set_executor(_kind)
    return _kind


def compile_ir(graph: Graph, name: str = "graph") -> Executable:
    """Compiles (or fetches from the core's caches) the executable for a built graph."""
    return _compile(graph.fb, name, graph.text)


def compile_text(text: str, name: str = "graph") -> Executable:
    """compile_ir for a graph given in the IR text form (parsed by the core)."""
    return _compile(text, name, text)


def _compile(source: "bytes | str", name: str, text: str) -> Executable:
    executor_kind()
    from ._capi import CapiExecutable
    emit_dir = None
    if options().dump_dir:  # the core's files for this graph, next to stats.dump's
        emit_dir = os.path.join(options().dump_dir, dump_stem(name, text))
    exe = CapiExecutable(source, target=options().target or None, emit_dir=emit_dir)
    log.info("compiled %s with the C executor (key %s)", name, exe.key[:12])
    return exe


def capi_stats() -> dict | None:
    if _kind != "capi":
        return None
    from . import _capi
    return _capi.get_stats()


def reset_capi_stats() -> None:
    if _kind == "capi":
        from . import _capi
        _capi.reset_stats()
