"""The op catalog and the element types, mirroring ir/ops.def and ir/dtype.h.

tests/python/test_ir.py checks these tables against the C++ sources line by line, so an op added
to ops.def without a matching line here fails a test instead of drifting.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import torch


class Category(enum.Enum):
    CREATE = "kCreate"    # no tensor inputs: constant, full
    CAST = "kCast"        # dtype conversion
    UNARY = "kUnary"      # float elementwise, one input
    BINARY = "kBinary"    # float elementwise with broadcasting
    COMPARE = "kCompare"  # elementwise with broadcasting, bool result
    WHERE = "kWhere"      # select with broadcasting
    MATMUL = "kMatmul"    # contractions
    REDUCE = "kReduce"    # reductions over dims
    LAYOUT = "kLayout"    # reshape / permute / expand / slice / cat
    INDEX = "kIndex"      # gather / scatter along a dim by an index tensor


@dataclass(frozen=True)
class OpInfo:
    name: str
    code: int
    category: Category
    min_inputs: int
    max_inputs: int  # -1: variadic


_C = Category
# name, code (graph.fbs: append only), category, min and max inputs -- as in ir/ops.def.
OPS: dict[str, OpInfo] = {o.name: o for o in [
    OpInfo("constant", 1, _C.CREATE, 0, 0),
    OpInfo("full", 2, _C.CREATE, 0, 0),
    OpInfo("cast", 3, _C.CAST, 1, 1),
    OpInfo("neg", 4, _C.UNARY, 1, 1),
    OpInfo("exp", 5, _C.UNARY, 1, 1),
    OpInfo("log", 6, _C.UNARY, 1, 1),
    OpInfo("sqrt", 7, _C.UNARY, 1, 1),
    OpInfo("rsqrt", 8, _C.UNARY, 1, 1),
    OpInfo("reciprocal", 9, _C.UNARY, 1, 1),
    OpInfo("abs", 10, _C.UNARY, 1, 1),
    OpInfo("relu", 11, _C.UNARY, 1, 1),
    OpInfo("tanh", 12, _C.UNARY, 1, 1),
    OpInfo("sigmoid", 13, _C.UNARY, 1, 1),
    OpInfo("silu", 14, _C.UNARY, 1, 1),
    OpInfo("gelu", 15, _C.UNARY, 1, 1),
    OpInfo("add", 16, _C.BINARY, 2, 2),
    OpInfo("sub", 17, _C.BINARY, 2, 2),
    OpInfo("mul", 18, _C.BINARY, 2, 2),
    OpInfo("div", 19, _C.BINARY, 2, 2),
    OpInfo("maximum", 20, _C.BINARY, 2, 2),
    OpInfo("minimum", 21, _C.BINARY, 2, 2),
    OpInfo("pow", 22, _C.BINARY, 2, 2),
    OpInfo("silu_backward", 23, _C.BINARY, 2, 2),
    OpInfo("sigmoid_backward", 24, _C.BINARY, 2, 2),
    OpInfo("eq", 25, _C.COMPARE, 2, 2),
    OpInfo("ne", 26, _C.COMPARE, 2, 2),
    OpInfo("lt", 27, _C.COMPARE, 2, 2),
    OpInfo("le", 28, _C.COMPARE, 2, 2),
    OpInfo("gt", 29, _C.COMPARE, 2, 2),
    OpInfo("ge", 30, _C.COMPARE, 2, 2),
    OpInfo("where", 31, _C.WHERE, 3, 3),
    OpInfo("linear", 32, _C.MATMUL, 2, 3),
    OpInfo("matmul", 33, _C.MATMUL, 2, 2),
    OpInfo("sum", 34, _C.REDUCE, 1, 1),
    OpInfo("mean", 35, _C.REDUCE, 1, 1),
    OpInfo("amax", 36, _C.REDUCE, 1, 1),
    OpInfo("reshape", 37, _C.LAYOUT, 1, 1),
    OpInfo("permute", 38, _C.LAYOUT, 1, 1),
    OpInfo("expand", 39, _C.LAYOUT, 1, 1),
    OpInfo("slice", 40, _C.LAYOUT, 1, 1),
    OpInfo("cat", 41, _C.LAYOUT, 1, -1),
    OpInfo("index_select", 42, _C.INDEX, 2, 2),
    OpInfo("index_add", 43, _C.INDEX, 3, 3),
]}


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
    def from_text(name: str) -> "DType | None":
        return _FROM_TEXT.get(name)

    @staticmethod
    def from_torch(dtype: torch.dtype) -> "DType | None":
        return _FROM_TORCH.get(dtype)

    def __str__(self) -> str:
        return self.text


_DTYPE_TEXT = {DType.BF16: "bf16", DType.F16: "f16", DType.F32: "f32", DType.F64: "f64",
               DType.I64: "i64", DType.I32: "i32", DType.BOOL: "bool"}
_DTYPE_SIZE = {DType.BF16: 2, DType.F16: 2, DType.F32: 4, DType.F64: 8, DType.I64: 8,
               DType.I32: 4, DType.BOOL: 1}
_FROM_TEXT = {v: k for k, v in _DTYPE_TEXT.items()}
_TO_TORCH = {DType.BF16: torch.bfloat16, DType.F16: torch.float16, DType.F32: torch.float32,
             DType.F64: torch.float64, DType.I64: torch.int64, DType.I32: torch.int32,
             DType.BOOL: torch.bool}
_FROM_TORCH = {v: k for k, v in _TO_TORCH.items()}
