"""The FX -> IR handlers of the core op families: elementwise, linear algebra, views and layout,
casts, reductions, indexing, and factories (Note [FX op handler registry] in registry.py).

It is one file past 500 lines because these families register through one table (at the end) and
share its argument helpers; the families with their own helpers (nn_ops, select_ops, attention_ops)
are modules of their own."""

from __future__ import annotations

import torch

from ..core.ir import SymExpr, SymList, provably_ge, sym_max, sym_min
from ..core.ops import DType
from ..errors import Unsupported
from . import attention_ops as _attention
from . import nn_ops as _nn
from .registry import register
from .sym_ops import SymBool
from .values import Ref, meta_val

_MISSING = object()


# ---- elementwise --------------------------------------------------------------------------------


def _unary(name):
    def h(c, x, *rest, inplace=False, approximate="none", **kw):
        if inplace or (rest and rest[0] is True):
            raise Unsupported(f"op {name} with inplace=True")
        if approximate != "none":
            raise Unsupported(f"op {name} with approximate={approximate!r}")
        x = c.tensor(x)
        if name not in ("neg", "abs") and not c.type(x).dtype.is_float:
            x = c.cast(x, c.out_dtype())  # PyTorch's float ops promote integers
        return c.op(name, [x])

    return h


def _binary(name):
    def h(c, a, b, *, alpha=1, rounding_mode=None, out=None):
        if rounding_mode is not None:
            raise Unsupported(f"op {name} with rounding_mode={rounding_mode!r}")
        if not isinstance(a, Ref) and not isinstance(b, Ref):
            raise Unsupported(f"op {name} of two scalars")
        if alpha != 1:
            b = _binary("mul")(c, b, alpha)
        a, b = c.tensor(a), c.tensor(b)
        if name == "div" and not (c.type(a).dtype.is_float or c.type(b).dtype.is_float):
            a, b = c.cast(a, DType.F32), c.cast(b, DType.F32)  # true division of integers
        return c.op(name, [a, b])

    return h


def _rsub(c, a, b, alpha=1):
    return _binary("sub")(c, b, a if alpha == 1 else _binary("mul")(c, a, alpha))


def _where(c, cond, a=_MISSING, b=_MISSING):
    if a is _MISSING:
        raise Unsupported("op where with one argument (nonzero: data-dependent size)")
    return c.op("where", [c.tensor(cond), c.tensor(a), c.tensor(b)])


# ---- contractions -------------------------------------------------------------------------------


def _linear(c, x, w, bias=None):
    return c.op("linear", [x, w] + ([bias] if bias is not None else []))


def _mm(c, a, b):
    return c.op("matmul", [a, b])


def _matmul(c, a, b):
    ra, rb = c.type(a).rank, c.type(b).rank
    if ra >= 2 and rb >= 2:
        return c.op("matmul", [a, b])
    a2 = c.reshape(a, (1,) + tuple(c.type(a).shape)) if ra == 1 else a
    b2 = c.reshape(b, tuple(c.type(b).shape) + (1,)) if rb == 1 else b
    return c.reshape(c.op("matmul", [a2, b2]), c.out_shape())


def _addmm(c, bias, a, b, *, beta=1, alpha=1):
    """bias + a @ b. With a bias row of N (what F.linear with a bias becomes), this is the IR's
    `linear` with its bias: PyTorch adds the bias before the one rounding, and so does linear."""
    n = c.type(b).shape[-1]
    if (
        isinstance(bias, Ref)
        and alpha == 1
        and beta == 1
        and c.type(bias).dtype == c.type(a).dtype
        and tuple(c.type(bias).shape) in ((n,), (1, n))
    ):
        w = c.op("permute", [b], {"dims": (1, 0)})
        return c.op("linear", [a, w, c.reshape(bias, (n,))])
    prod = c.op("matmul", [a, b])
    if alpha != 1:
        prod = _binary("mul")(c, prod, alpha)
    if beta == 0:
        return prod
    if beta != 1:
        bias = _binary("mul")(c, bias, beta)
    return c.op("add", [prod, bias])


# ---- layout -------------------------------------------------------------------------------------


def _dims_arg(rest):
    if len(rest) == 1 and isinstance(rest[0], (list, tuple)):
        return list(rest[0])
    return list(rest)


def _permute(c, x, *dims, **kw):
    dims = _dims_arg(dims) if dims else list(kw["dims"])
    return c.op("permute", [x], {"dims": tuple(int(d) for d in dims)})


def _transpose(c, x, d0, d1):
    r = c.type(x).rank
    if r < 2:
        return x
    dims = list(range(r))
    d0, d1 = d0 % r, d1 % r
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return c.op("permute", [x], {"dims": tuple(dims)})


def _t(c, x):
    return _transpose(c, x, 0, 1)


def _reshape(c, x, *args, **kw):
    return c.reshape(x, c.out_shape())


def _expand(c, x, *args, **kw):
    shape = c.out_shape()
    return x if tuple(c.type(x).shape) == tuple(shape) else c.op("expand", [x], {"shape": shape})


def _slice(c, x, dim=0, start=None, end=None, step=1):
    t = c.type(x)
    dim = dim % t.rank
    size = t.shape[dim]
    start = _slice_bound(c, start, size, c.ex.b.const(0))
    end = _slice_bound(c, end, size, size)
    if start == 0 and end == size and step == 1:
        return x
    if not provably_ge(end, start):
        end = start if provably_ge(start, end) else end
    return c.op(
        "slice",
        [x],
        {"dim": dim, "start": SymList([start]), "end": SymList([end]), "step": int(step)},
    )


def _slice_bound(c, v, size: SymExpr, default: SymExpr) -> SymExpr:
    if v is None:
        return default
    v = c.ex.sym(v)
    k = v.as_const()
    if k is not None and k >= 2**62:
        return size
    if k is not None and k < 0:  # from the end, clamped at 0 as in PyTorch (x[-5:] of 3)
        v = size + k
        return v if provably_ge(v, 0) else sym_max(v, c.ex.b.const(0))
    return v if provably_ge(size, v) else sym_min(v, size)


def _slice_backward(c, grad, input_sizes, dim, start, end, step):
    """The gradient of a slice: grad placed at [start, end) of zeros, as cat(zeros, grad, zeros)."""
    if step != 1:
        _fail(c, "step != 1")
    shape = list(c.out_shape())
    dim = dim % len(shape)
    size = shape[dim]
    start = _slice_bound(c, start, size, c.ex.b.const(0))
    end = _slice_bound(c, end, size, size)
    dtype = c.type(grad).dtype
    parts = []
    for extent in (start, None, size - end):
        if extent is None:
            parts.append(grad)
        elif extent != 0:
            part = list(shape)
            part[dim] = extent
            parts.append(c.op("full", [], {"dtype": dtype, "shape": SymList(part), "value": 0.0}))
    return _cat(c, parts, dim)


def _fail(c, why):
    raise Unsupported(f"op {c.node.target}: {why}")


def _cat(c, tensors, dim=0):
    """torch.cat promotes its operands to one dtype, and skips 1-d empty operands beside others
    of a higher rank (a KV cache's first update: cat([tensor([]), k], -2))."""
    dtype = c.out_dtype()
    tensors = [c.cast(c.tensor(t), dtype) for t in tensors]
    rank = max(c.type(t).rank for t in tensors)
    if rank > 1:
        tensors = [
            t for t in tensors if not (c.type(t).rank == 1 and c.type(t).shape[0].as_const() == 0)
        ]
    if len(tensors) == 1:
        return tensors[0]
    return c.op("cat", tensors, {"dim": int(dim) % max(c.type(tensors[0]).rank, 1)})


def _identity(c, x, *args, **kw):
    return x


def _cast_to_out(c, x, *args, **kw):
    """to / _to_copy / convert_element_type / float() / type_as: a cast to the result dtype."""
    v, src = c.out_val(), meta_val(c.node.args[0]) if c.node.args else None
    if isinstance(src, torch.Tensor) and src.device != v.device:
        _fail(c, f"moves data from {src.device} to {v.device}")
    return c.cast(x, c.out_dtype())


# ---- reductions ---------------------------------------------------------------------------------


def _reduce(name):
    def h(c, x, dim=None, keepdim=False, *, dtype=None, out=None):
        dims = _nn.reduced_dims(c.type(x).rank, dim)
        attrs = {"dims": tuple(dims), "keepdim": int(bool(keepdim))}
        out_dtype = c.out_dtype()
        if out_dtype != c.type(x).dtype:
            attrs["dtype"] = out_dtype
        return c.op(name, [x], attrs)

    return h


# ---- indexing -----------------------------------------------------------------------------------


def _index_select(c, x, dim, idx):
    return c.op("index_select", [x, idx], {"dim": int(dim) % c.type(x).rank})


def _gather_dims(c, x: Ref, first: int, idxs: list[Ref], flatten=False) -> tuple[Ref, Ref, list]:
    """Flattens dims first..first+k-1 of x into one and combines the k index tensors into one
    linear index over it. Returns (flattened x, linear index, x's original shape). `flatten`:
    index tensors of any one shape are read flattened (x[pos] with pos [b, s], RoPE's
    cos[position_ids]); the caller reshapes the result."""
    shape = list(c.type(x).shape)
    n = None
    if (
        flatten
        and idxs
        and all(c.type(i).dtype != DType.BOOL for i in idxs)
        and all(tuple(c.type(i).shape) == tuple(c.type(idxs[0]).shape) for i in idxs)
    ):
        idxs = [c.reshape(i, (_nn.numel(c, c.type(i).shape),)) for i in idxs]
    for i in idxs:
        t = c.type(i)
        if t.dtype == DType.BOOL:
            _fail(c, "boolean index tensors (data-dependent result size)")
        if t.rank != 1:
            _fail(c, "multi-dimensional index tensors of different shapes (broadcast)")
        if n is not None and t.shape[0] != n:
            _fail(c, "index tensors of different lengths")
        n = t.shape[0]
    if len(idxs) == 1:
        return x, idxs[0], shape
    inner = shape[first : first + len(idxs)]
    lin, stride = None, c.ex.b.const(1)
    for i, d in reversed(list(zip(idxs, inner))):
        term = c.cast(i, DType.I64)
        if stride != 1:
            term = c.op("mul", [term, c.const(stride, DType.I64)])
        lin = term if lin is None else c.op("add", [term, lin])
        stride = stride * d
    flat = c.ex.b.const(1)
    for d in inner:
        flat = flat * d
    xf = c.reshape(x, shape[:first] + [flat] + shape[first + len(idxs) :])
    return xf, lin, shape


def _advanced_index(c, x: Ref, items: list):
    """x[items] for basic items (None, slices, ints, Ellipsis) and adjacent 1-D index tensors."""
    rank = c.type(x).rank
    if any(i is Ellipsis for i in items):
        k = items.index(Ellipsis)
        used = sum(1 for i in items if i is not None and i is not Ellipsis)
        items = items[:k] + [slice(None)] * (rank - used) + items[k + 1 :]
    tensor_pos, d, cur = [], 0, x
    for item in items:
        if item is None:
            shape = list(c.type(cur).shape)
            cur = c.reshape(cur, shape[:d] + [1] + shape[d:])
            d += 1
        elif isinstance(item, slice):
            cur = _slice(c, cur, d, item.start, item.stop, 1 if item.step is None else item.step)
            d += 1
        elif isinstance(item, Ref):
            tensor_pos.append((d, item))
            d += 1
        elif isinstance(item, (int, SymExpr)) and not isinstance(item, bool):
            if isinstance(item, int) and item < 0:
                item = c.type(cur).shape[d] + item
            cur = _slice(c, cur, d, item, c.ex.sym(item) + 1, 1)
            shape = list(c.type(cur).shape)
            cur = c.reshape(cur, shape[:d] + shape[d + 1 :])
        else:
            _fail(c, f"index {item!r}")
    if not tensor_pos:
        return cur
    dims = [p for p, _ in tensor_pos]
    if dims != list(range(dims[0], dims[0] + len(dims))):
        _fail(c, "index tensors that are not adjacent")
    # Note [Index tensors that broadcast] (attention_ops.py)
    idxs = _attention.broadcast_index_tensors(c, [r for _, r in tensor_pos])
    xf, lin, _ = _gather_dims(c, cur, dims[0], idxs, flatten=True)
    out = c.op("index_select", [xf, lin], {"dim": dims[0]})
    return c.reshape(out, c.out_shape())


def _getitem(c, obj, idx):
    if isinstance(obj, (tuple, list)):
        return obj[idx]
    if not isinstance(obj, Ref):
        _fail(c, f"getitem on {type(obj).__name__}")
    return _advanced_index(c, obj, list(idx) if isinstance(idx, (tuple, list)) else [idx])


def _index(c, x, indices):
    return _advanced_index(c, x, [slice(None) if i is None else i for i in indices])


def _index_add(c, x, dim, idx, src, *, alpha=1):
    if alpha != 1:
        src = _binary("mul")(c, src, alpha)
    return c.op("index_add", [x, idx, src], {"dim": int(dim) % c.type(x).rank})


def _index_put(c, x, indices, values, accumulate=False):
    """x[indices] = values (index_copy) or += (index_add) over the indexed dims flattened into
    one. Without accumulate, which of several writes to one element wins is unspecified, as in
    PyTorch."""
    pos = [(i, r) for i, r in enumerate(indices) if r is not None]
    dims = [p for p, _ in pos]
    if not pos or dims != list(range(dims[0], dims[0] + len(dims))):
        _fail(c, "index tensors that are not adjacent")
    xf, lin, shape = _gather_dims(c, x, dims[0], [r for _, r in pos], flatten=True)
    picked = list(c.type(xf).shape)
    picked[dims[0]] = c.type(lin).shape[0]
    # The values' shape before the index was flattened: x's dims with the indexed ones replaced by
    # the index's shape (the gradient of x[pos] with pos [b, s]).
    unflat = shape[: dims[0]] + list(c.type(pos[0][1]).shape) + shape[dims[0] + len(dims) :]
    values = c.tensor(values)
    if c.type(values).dtype != c.type(x).dtype:
        values = c.cast(values, c.type(x).dtype)
    if tuple(c.type(values).shape) not in (tuple(picked), tuple(unflat)):
        values = c.op("expand", [values], {"shape": SymList(unflat)})
    values = c.reshape(values, picked)
    out = c.op("index_add" if accumulate else "index_copy", [xf, lin, values], {"dim": dims[0]})
    return c.reshape(out, shape)


def _select(c, x, dim, index):
    """x.select(dim, index): a slice of one element, then that dim dropped; along a leading dim
    of static size, rows of x with its first two dims merged (Note [Selects of a leading dim])."""
    t = c.type(x)
    dim = dim % t.rank
    index = _select_index(c, index, t.shape[dim])
    if dim == 0 and t.rank >= 2 and all(d.as_const() is not None for d in t.shape[:2]):
        rows = t.shape[1]
        merged = c.reshape(x, [t.shape[0] * rows, *t.shape[2:]])
        return _slice(c, merged, 0, index * rows, (index + 1) * rows, 1)
    r = _slice(c, x, dim, index, index + 1, 1)
    return c.reshape(r, c.out_shape())


# Note [Selects of a leading dim]
# A weight gradient of the grouped experts is one [E, N, K] value, and each expert's parameter
# takes x[e]: 64 selects of it, each a graph output (every output is a buffer of its own). As a
# slice of one element and then a reshape dropping that dim, each costs two copy kernels; as rows
# e N .. (e + 1) N of x viewed as [E N, K], one reshape shared by all of them (cse) and one slice
# each: half the launches (the seed layer's backward: 769 copies before).


def _select_index(c, index, size):
    i = c.ex.sym(index)
    k = i.as_const()
    if k is not None and k < 0:
        i = size + k
    if not (provably_ge(i, 0) and provably_ge(size - 1, i)):
        _fail(c, f"index {index} may be out of range for a dim of size {size}")
    return i


def _select_backward(c, grad, input_sizes, dim, index):
    """The gradient of select: grad placed at `index` of zeros (slice_backward of one element)."""
    rank = len(c.out_shape())
    dim = dim % rank
    shape = list(c.type(grad).shape)
    g = c.reshape(grad, shape[:dim] + [1] + shape[dim:])
    index = _select_index(c, index, c.out_shape()[dim])
    return _slice_backward(c, g, input_sizes, dim, index, index + 1, 1)


# ---- factories ----------------------------------------------------------------------------------


def _factory(fill):
    """full / zeros / ones / empty / *_like / new_* / scalar_tensor, with the result's shape and
    dtype from PyTorch. A symbolic fill (a SymInt or SymBool) is computed at call time."""

    def h(c, *args, **kw):
        value = fill(args, kw) if callable(fill) else fill
        if isinstance(value, Ref):
            _fail(c, "a tensor fill value")
        dtype = c.out_dtype()
        shape = c.out_shape()
        if isinstance(value, SymExpr) and value.as_const() is not None:
            value = value.as_const()
        if isinstance(value, (SymExpr, SymBool)):
            r = c.cast(c.tensor(value), dtype)
            return r if not shape else c.op("expand", [r], {"shape": shape})
        v = float(value) if dtype.is_float else int(value)
        if not shape:
            return c.op("constant", [], {"dtype": dtype, "value": v})
        return c.op("full", [], {"dtype": dtype, "shape": shape, "value": v})

    return h


def _fill_arg(position):
    return lambda args, kw: kw.get("fill_value", args[position] if len(args) > position else 0)


def _copy(c, dst, src, non_blocking=False):
    """aten.copy, the functional copy_ (a backward's clone of an in-place update: new_empty_strided
    then copy): src's values cast to dst's dtype and broadcast to its shape."""
    shape = c.type(dst).shape
    src = c.cast(c.tensor(src), c.type(dst).dtype)
    if tuple(c.type(src).shape) == tuple(shape):
        return src
    return c.op("expand", [src], {"shape": SymList(shape)})


# ---- the table ----------------------------------------------------------------------------------

_TABLE = {
    "linear": _linear,
    "mm": _mm,
    "bmm": _mm,
    "matmul": _matmul,
    "addmm": _addmm,
    "t": _t,
    "transpose": _transpose,
    "permute": _permute,
    "view": _reshape,
    "reshape": _reshape,
    "_unsafe_view": _reshape,
    "unsqueeze": _reshape,
    "squeeze": _reshape,
    "flatten": _reshape,
    "unflatten": _reshape,
    "view_as": _reshape,
    "reshape_as": _reshape,
    "expand": _expand,
    "expand_as": _expand,
    "slice": _slice,
    "cat": _cat,
    "concat": _cat,
    "slice_backward": _slice_backward,
    "to": _cast_to_out,
    "_to_copy": _cast_to_out,
    "convert_element_type": _cast_to_out,
    "type_as": _cast_to_out,
    "float": _cast_to_out,
    "half": _cast_to_out,
    "bfloat16": _cast_to_out,
    "double": _cast_to_out,
    "long": _cast_to_out,
    "int": _cast_to_out,
    "bool": _cast_to_out,
    "rsub": _rsub,
    "where": _where,
    "index_select": _index_select,
    "index": _index,
    "getitem": _getitem,
    "index_add": _index_add,
    "index_put": _index_put,
    "select": _select,
    "select_backward": _select_backward,
    "full": _factory(_fill_arg(1)),
    "full_like": _factory(_fill_arg(1)),
    "new_full": _factory(_fill_arg(2)),
    "scalar_tensor": _factory(_fill_arg(0)),
    "clone": _identity,
    "copy": _copy,
    "contiguous": _identity,
    "detach": _identity,
    "alias": _identity,
    "lift_fresh_copy": _identity,
    "lift_fresh": _identity,
}
for _n in (
    "zeros",
    "zeros_like",
    "new_zeros",
    "empty",
    "empty_like",
    "new_empty",
    "new_empty_strided",
):
    _TABLE[_n] = _factory(0)
for _n in ("ones", "ones_like", "new_ones"):
    _TABLE[_n] = _factory(1)
# gelu (with its approximate= argument) is nn_ops'.
for _n in (
    "neg",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "abs",
    "relu",
    "tanh",
    "sigmoid",
    "silu",
):
    _TABLE[_n] = _unary(_n)
for _n in (
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "minimum",
    "pow",
    "silu_backward",
    "sigmoid_backward",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
):
    _TABLE[_n] = _binary(_n)
_TABLE.update(
    {
        "true_divide": _TABLE["div"],
        "subtract": _TABLE["sub"],
        "multiply": _TABLE["mul"],
        "negative": _TABLE["neg"],
        "sum": _reduce("sum"),
        "mean": _reduce("mean"),
        "amax": _reduce("amax"),
    }
)
register(_TABLE)
