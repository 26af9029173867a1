"""GraphRunner: one compiled graph as Python calls it, the interface both executors implement
(Note [Executor choice] in runtime.py). Not the core's Executable (runtime/executable.h), which the
C executor's runner holds through the C API."""

from __future__ import annotations

import abc

import torch


class GraphRunner(abc.ABC):
    """One compiled graph, run from Python. Inputs are in IR input order: contiguous tensors, and
    Python ints for `input %n: sym ...` values; outputs are new contiguous tensors in IR output
    order."""

    kind: str = ""
    key: str = ""

    @abc.abstractmethod
    def prepare(self, inputs: list) -> list[tuple[tuple[int, ...], torch.dtype]]:
        """Binds the symbols from the inputs (checking them) and returns each output's
        (shape, dtype)."""

    @abc.abstractmethod
    def run(self, inputs: list) -> list[torch.Tensor]:
        """Computes the outputs (allocated with torch on the inputs' device)."""
