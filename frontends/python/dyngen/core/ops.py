"""The element types: their codes in ir/dtype.h and graph.fbs, and the torch dtype of each (the
binding between torch and the C API, like dg_tensor's dtype field). The op catalog lives in
ir/ops.def only (Note [One IR] in core/ir.py). tests/python/test_ir.py checks the codes against
ir/dtype.h."""

from __future__ import annotations

import enum

import torch


class DType(enum.Enum):
    """Element types; the value is the graph.fbs / dg_tensor code (ir/dtype.h)."""

    BF16 = 1
    F16 = 2
    F32 = 3
    F64 = 4
    I64 = 5
    I32 = 6
    BOOL = 7

    @property
    def text(self) -> str:
        return _DTYPE_TEXT[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.BF16, DType.F16, DType.F32, DType.F64)

    @property
    def itemsize(self) -> int:
        return _DTYPE_SIZE[self]

    @property
    def torch(self) -> torch.dtype:
        return _TO_TORCH[self]

    @staticmethod
    def from_text(name: str) -> DType | None:
        return _FROM_TEXT.get(name)

    @staticmethod
    def from_torch(dtype: torch.dtype) -> DType | None:
        return _FROM_TORCH.get(dtype)

    def __str__(self) -> str:
        return self.text


_DTYPE_TEXT = {
    DType.BF16: "bf16",
    DType.F16: "f16",
    DType.F32: "f32",
    DType.F64: "f64",
    DType.I64: "i64",
    DType.I32: "i32",
    DType.BOOL: "bool",
}
_DTYPE_SIZE = {
    DType.BF16: 2,
    DType.F16: 2,
    DType.F32: 4,
    DType.F64: 8,
    DType.I64: 8,
    DType.I32: 4,
    DType.BOOL: 1,
}
_FROM_TEXT = {v: k for k, v in _DTYPE_TEXT.items()}
_TO_TORCH = {
    DType.BF16: torch.bfloat16,
    DType.F16: torch.float16,
    DType.F32: torch.float32,
    DType.F64: torch.float64,
    DType.I64: torch.int64,
    DType.I32: torch.int32,
    DType.BOOL: torch.bool,
}
_FROM_TORCH = {v: k for k, v in _TO_TORCH.items()}
