"""One FX node -> IR nodes. Torch-level (Dynamo) and ATen-level (AOTAutograd) spellings of an op
share one handler, keyed by the op's plain name ("mm", "add", "_to_copy", "silu", ...).

A handler receives the node's arguments with FX nodes replaced by what they stand for: `Ref` for a
tensor, `SymExpr` for a symbolic integer, Python values as they are. Result shapes that PyTorch
already computed (reshape targets, -1 resolution, expand sizes, factory shapes) are read from the
node's FakeTensor; the IR typing rules then re-derive and check them (Note [Export checks every
node against PyTorch] in export.py).

This module dispatches a node to its handler (registry.HANDLERS); the handlers live in one module
per op family, which register themselves when imported here (Note [FX op handler registry]).
"""

from __future__ import annotations

import operator

import torch
import torch.fx

from ..core.ir import IRTypeError, SymExpr, SymList
from ..core.ops import DType
from ..errors import Unsupported

# The op families register their handlers on import (Note [FX op handler registry]).
from . import attention_ops, basic_ops, moe_ops, nn_ops, select_ops, sort_ops  # noqa: F401
from .registry import HANDLERS
from .sym_ops import SymBool, symbool_to_ir
from .values import Ref, dtype_of, meta_val, type_error


class _Ctx:
    """What a handler needs: the exporter, the node being translated, and IR-building helpers."""

    def __init__(self, ex, node: torch.fx.Node):
        self.ex, self.node = ex, node

    def op(self, name: str, inputs, attrs=None) -> Ref:
        return Ref(self.ex.b.op(name, [r.vid for r in inputs], attrs))

    def type(self, r: Ref):
        return self.ex.b.tensor(r.vid)

    def out_val(self):
        v = meta_val(self.node)
        if not isinstance(v, torch.Tensor):
            raise Unsupported(f"op {self.node.target}: no tensor metadata")
        return v

    def out_shape(self) -> SymList:
        return SymList(self.ex.shape(self.out_val()))

    def out_dtype(self) -> DType:
        return dtype_of(self.out_val().dtype, str(self.node.target))

    def const(self, value, dtype: DType | None = None) -> Ref:
        """A Python scalar as a rank-0 `constant` (PyTorch's wrapped-number promotion applies)."""
        if isinstance(value, SymExpr):
            if value.as_const() is None:
                return self.sym_scalar(value, dtype or DType.I64)
            value = value.as_const()
        if dtype is None:
            dtype = (
                DType.BOOL
                if isinstance(value, bool)
                else (DType.I64 if isinstance(value, int) else DType.F32)
            )
        v = float(value) if dtype.is_float else int(value)
        return self.op("constant", [], {"dtype": dtype, "value": v})

    def sym_scalar(self, e: SymExpr, dtype: DType) -> Ref:
        """Note [Symbolic scalars as tensors]

        A SymInt operand (mean's backward divides by a symbolic count; x * s0) is `sym_constant`,
        a rank-0 tensor holding the expression's value at call time; as an i64 it promotes like the
        Python int it stands for."""
        return self.cast(
            self.op("sym_constant", [], {"dtype": DType.I64, "value": SymList([e])}), dtype
        )

    def tensor(self, x) -> Ref:
        if isinstance(x, Ref):
            return x
        if isinstance(x, SymBool):
            return x.materialize(self)
        if isinstance(x, (bool, int, float, SymExpr)):
            return self.const(x)
        raise Unsupported(f"op {self.node.target}: operand {x!r}")

    def cast(self, x: Ref, dtype: DType) -> Ref:
        return x if self.type(x).dtype == dtype else self.op("cast", [x], {"dtype": dtype})

    def reshape(self, x: Ref, shape) -> Ref:
        shape = SymList(self.ex.b.sym(s) for s in shape)
        if tuple(self.type(x).shape) == tuple(shape):
            return x
        return self.op("reshape", [x], {"shape": shape})


_OPERATORS = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "div",
    operator.neg: "neg",
    operator.getitem: "getitem",
    operator.eq: "eq",
    operator.ne: "ne",
    operator.lt: "lt",
    operator.le: "le",
    operator.gt: "gt",
    operator.ge: "ge",
    operator.pow: "pow",
    operator.matmul: "matmul",
    operator.iadd: "add_",
    operator.imul: "mul_",
    operator.isub: "sub_",
    operator.itruediv: "div_",
}
# Ops that return a view of their first operand: an in-place op on their result is unsupported.
_VIEWS = {
    "view",
    "reshape",
    "_unsafe_view",
    "unsqueeze",
    "squeeze",
    "flatten",
    "unflatten",
    "view_as",
    "reshape_as",
    "expand",
    "expand_as",
    "slice",
    "t",
    "transpose",
    "permute",
    "getitem",
    "index",
    "detach",
    "alias",
    "contiguous",
    "to",
    "type_as",
    "float",
    "half",
    "bfloat16",
    "double",
    "long",
    "int",
    "bool",
    "select",
    "narrow",
    "as_strided",
}
# Nodes kept only for their checks (no value); skipped when nothing uses them.
_ASSERTS = {
    "_assert_scalar",
    "_assert_tensor_metadata",
    "sym_constrain_range_for_size",
    "sym_constrain_range",
    "_assert_async",
    "_check",
    "_check_is_size",
}


def _item(ex, n: torch.fx.Node) -> Ref:
    """`t.item()` of a 0-d float tensor, as under torch.compile(dynamic=True), where Dynamo passes
    Python floats (PEFT's LoRA scaling) as 0-d tensors: the tensor itself is the operand. A rank-0
    operand promotes like the Python scalar it stands for, so `x * t.item()` keeps x's dtype."""
    src = ex.env[n.args[0]]
    if not isinstance(src, Ref) or ex.b.tensor(src.vid).rank != 0:
        raise Unsupported(f"op item ({n.target}) of a non-scalar")
    return src


# Keyword arguments with no meaning in the IR (memory placement; device moves are checked by the
# cast handler), and ops whose dtype argument is read from the result's FakeTensor instead.
_IGNORED_KWARGS = {
    "layout",
    "device",
    "pin_memory",
    "memory_format",
    "non_blocking",
    "requires_grad",
    "copy",
}
_DTYPE_FROM_RESULT = {"dtype"}
_RESULT_TYPED = {
    "to",
    "_to_copy",
    "convert_element_type",
    "type_as",
    "float",
    "half",
    "bfloat16",
    "double",
    "long",
    "int",
    "bool",
    "full",
    "zeros",
    "ones",
    "empty",
    "full_like",
    "zeros_like",
    "ones_like",
    "empty_like",
    "new_zeros",
    "new_ones",
    "new_full",
    "new_empty",
    "scalar_tensor",
} | nn_ops.RESULT_TYPED


def _inplace(ex, n: torch.fx.Node, key: str, handler, args, kwargs) -> Ref:
    """`x.op_(...)` on a value the graph computed itself, as SSA: the result replaces x for every
    later use. Mutating a graph input or a view (whose base would change too) is unsupported."""
    target = n.args[0] if n.args else None
    if not isinstance(target, torch.fx.Node) or not isinstance(ex.env.get(target), Ref):
        raise Unsupported(f"op {key} ({n.target}) on a non-tensor")
    if target.op != "call_function" and target.op != "call_method" or op_key(target)[0] in _VIEWS:
        raise Unsupported(f"op {key} ({n.target}): in-place update of a graph input or a view")
    c = _Ctx(ex, n)
    result = c.cast(handler(c, *args, **kwargs), c.type(ex.env[target]).dtype)
    ex.env[target] = result
    return result


def op_key(n: torch.fx.Node) -> tuple[str, str]:
    """(plain name, printable target) of a call node."""
    t = n.target
    if n.op == "call_method":
        return t, f"Tensor.{t}"
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        packet = t.overloadpacket if isinstance(t, torch._ops.OpOverload) else t
        ns = packet._qualified_op_name.split("::")[0]
        name = packet.__name__
        return (name if ns in ("aten", "prims") else f"{ns}.{name}"), str(t)
    if t in _OPERATORS:
        return _OPERATORS[t], f"operator.{t.__name__}"
    name = getattr(t, "__name__", None)
    for mod, prefix in (
        (torch, "torch"),
        (torch.nn.functional, "torch.nn.functional"),
        (torch._C._nn, "torch._C._nn"),
        (torch.Tensor, "torch.Tensor"),
        (torch._C._VariableFunctions, "torch"),
    ):
        if name and getattr(mod, name, None) is t:
            return name, f"{prefix}.{name}"
    return (name or repr(t)), (getattr(t, "__module__", "") or "") + "." + (name or repr(t))


def node_to_ir(ex, n: torch.fx.Node):
    """Translates one call node to IR; returns a Ref, a SymExpr, a Python value or a tuple of
    them."""
    key, target = op_key(n)
    if key in _ASSERTS and not n.users:
        return None
    val = meta_val(n)
    if isinstance(val, torch.SymInt) or (isinstance(val, int) and not isinstance(val, bool)):
        return ex.sym(val)  # sizes and size arithmetic: the expression PyTorch derived
    if isinstance(val, torch.Size) or (
        isinstance(val, tuple)
        and val
        and all(isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool) for v in val)
    ):
        return tuple(ex.sym(v) for v in val)  # x.size(), x.shape
    if key == "size" and val is None and n.args and isinstance(ex.env.get(n.args[0]), Ref):
        t = ex.b.tensor(ex.env[n.args[0]].vid)  # Dynamo may leave size() without a value
        return t.shape[n.args[1] % t.rank] if len(n.args) > 1 else tuple(t.shape)
    if key == "item" and isinstance(val, torch.SymFloat):
        return _item(ex, n)
    if isinstance(val, (torch.SymBool, bool)) and not any(
        isinstance(a, torch.fx.Node) and isinstance(ex.env.get(a), Ref) for a in n.args
    ):
        return symbool_to_ir(ex, n, key, target, val)
    if isinstance(val, (torch.SymFloat, torch.SymBool)):
        raise Unsupported(f"op {key} ({target}): symbolic {type(val).__name__}")
    inplace = key.endswith("_") and not key.startswith("_") and key[:-1] in HANDLERS
    handler = HANDLERS.get(key[:-1] if inplace else key)
    if handler is None:
        raise Unsupported(f"op {key} ({target})")
    args = torch.fx.node.map_arg(n.args, lambda a: ex.env[a])
    kwargs = dict(torch.fx.node.map_arg(n.kwargs, lambda a: ex.env[a]))
    for k in _IGNORED_KWARGS | (_DTYPE_FROM_RESULT if key in _RESULT_TYPED else set()):
        kwargs.pop(k, None)
    try:
        if inplace:
            return _inplace(ex, n, key, handler, args, kwargs)
        return handler(_Ctx(ex, n), *args, **kwargs)
    except IRTypeError as e:
        raise type_error(n, e) from None
    except TypeError as e:
        raise Unsupported(f"op {key} ({target}): arguments not understood: {e}") from None
