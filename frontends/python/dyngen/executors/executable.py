"""The interface every executor implements (Note [Executor choice] in runtime.py)."""

from __future__ import annotations

import abc

import torch


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
