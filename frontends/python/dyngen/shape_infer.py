"""Result type of each op from its operands and attributes: a port of ir/shape_infer.cc.

The messages are the C++ ones, so an error reads the same whichever side finds it.
"""
from __future__ import annotations

from .ir import Graph, IRTypeError, SymList, TensorType
from .ops import OPS, Category, DType
from .symbolic import SymExpr, ceildiv, provably_ge


def _category_rank(t: DType) -> int:
    if t == DType.BOOL:
        return 0
    return 2 if t.is_float else 1


def _float_rank(t: DType) -> int:
    return {DType.F64: 3, DType.F32: 2}.get(t, 1)


def promote_types(a: DType, a_scalar: bool, b: DType, b_scalar: bool) -> DType:
    """PyTorch's promotion, where a rank-0 operand does not raise the dtype within its category."""
    if a == b:
        return a
    ca, cb = _category_rank(a), _category_rank(b)
    if a_scalar != b_scalar:
        if a_scalar and ca <= cb:
            return b
        if b_scalar and cb <= ca:
            return a
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        if _float_rank(a) != _float_rank(b):
            return a if _float_rank(a) > _float_rank(b) else b
        return DType.F32  # bf16 with f16
    if ca == 1:
        return DType.I64 if DType.I64 in (a, b) else DType.I32
    return a


def broadcast_shapes(a, b):
    """Numpy broadcasting of symbolic shapes; None if the dims cannot be proven compatible."""
    n = max(len(a), len(b))
    one = SymExpr(1)
    out = []
    for i in range(n):
        da = one if i < n - len(a) else a[i - (n - len(a))]
        db = one if i < n - len(b) else b[i - (n - len(b))]
        if da == db or db == one:
            out.append(da)
        elif da == one:
            out.append(db)
        else:
            return None
    return tuple(out)


def _norm_axis(axis: int, rank: int) -> int:
    if axis < 0:
        axis += rank
    return -1 if axis < 0 or axis >= rank else axis


class _Fail(Exception):
    pass


def _fail(msg: str):
    raise _Fail(msg)


def _get_int(attrs, k):
    v = attrs.get(k)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _get_float(attrs, k):
    v = attrs.get(k)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _get_ints(attrs, k):
    v = attrs.get(k)
    return tuple(v) if isinstance(v, tuple) and not isinstance(v, SymList) else None


def _get_syms(attrs, k):
    v = attrs.get(k)
    if isinstance(v, SymList):
        return tuple(v)
    if isinstance(v, tuple):
        return tuple(SymExpr(i) for i in v)
    return None


def _get_dtype(attrs, k):
    v = attrs.get(k)
    return v if isinstance(v, DType) else None


def _elementwise(g: Graph, op: str, ins) -> TensorType:
    cat = OPS[op].category
    shape = g.tensor(ins[0]).shape
    first = 1 if cat == Category.WHERE else 0
    if cat == Category.WHERE and g.tensor(ins[0]).dtype != DType.BOOL:
        _fail(f"condition must be bool, got {g.tensor(ins[0]).dtype.text}")
    for i in ins[1:]:
        s = broadcast_shapes(shape, g.tensor(i).shape)
        if s is None:
            _fail(f"shapes {g.tensor(ins[0])} and {g.tensor(i)} do not broadcast")
        shape = s
    dtype = g.tensor(ins[first]).dtype
    scalar = g.tensor(ins[first]).rank == 0
    for i in ins[first + 1:]:
        t = g.tensor(i)
        dtype = promote_types(dtype, scalar, t.dtype, t.rank == 0)
        scalar = scalar and t.rank == 0
    if cat == Category.COMPARE:
        dtype = DType.BOOL
    if (cat in (Category.UNARY, Category.BINARY) and not dtype.is_float
            and op not in ("neg", "abs", "add", "sub", "mul", "maximum", "minimum")):
        _fail(f"needs a floating-point operand, got {dtype.text}")
    return TensorType(dtype, shape)


def _matmul(g: Graph, op: str, ins) -> TensorType:
    a, b = g.tensor(ins[0]), g.tensor(ins[1])
    if a.dtype != b.dtype:
        _fail(f"operand dtypes differ: {a} and {b}")
    if not a.dtype.is_float:
        _fail("needs floating-point operands")
    if op == "linear":
        if a.rank < 1 or b.rank != 2:
            _fail("expects x[..., K] and w[N, K]")
        if a.shape[-1] != b.shape[1]:
            _fail(f"inner dims differ: {a} and {b}")
        if len(ins) == 3:
            bias = g.tensor(ins[2])
            if bias.dtype != a.dtype or bias.rank != 1 or bias.shape[0] != b.shape[0]:
                _fail(f"bias must be {a.dtype.text}[{b.shape[0]}]")
        return TensorType(a.dtype, a.shape[:-1] + (b.shape[0],))
    if a.rank < 2 or b.rank < 2:
        _fail("expects operands of rank >= 2")
    if a.shape[-1] != b.shape[-2]:
        _fail(f"inner dims differ: {a} and {b}")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if batch is None:
        _fail("batch dims do not broadcast")
    return TensorType(a.dtype, batch + (a.shape[-2], b.shape[-1]))


def _reduce(g: Graph, op: str, ins, attrs) -> TensorType:
    x = g.tensor(ins[0])
    dims = _get_ints(attrs, "dims")
    if dims is None:
        _fail("missing attribute dims")
    keepdim = _get_int(attrs, "keepdim") or 0
    reduced = [False] * x.rank
    for d in dims:
        a = _norm_axis(d, x.rank)
        if a < 0:
            _fail(f"dim {d} out of range for {x}")
        if reduced[a]:
            _fail(f"dim {d} repeated")
        reduced[a] = True
    shape = []
    for i in range(x.rank):
        if not reduced[i]:
            shape.append(x.shape[i])
        elif keepdim:
            shape.append(SymExpr(1))
    dtype = _get_dtype(attrs, "dtype") or x.dtype
    if op == "mean" and not dtype.is_float:
        _fail("needs a float dtype")
    return TensorType(dtype, tuple(shape))


def _layout(g: Graph, op: str, ins, attrs) -> TensorType:
    x = g.tensor(ins[0])
    if op == "reshape":
        shape = _get_syms(attrs, "shape")
        if shape is None:
            _fail("missing attribute shape")
        out = TensorType(x.dtype, shape)
        if out.numel() != x.numel():
            _fail(f"cannot reshape {x} to {out}")
        return out
    if op == "permute":
        dims = _get_ints(attrs, "dims")
        if dims is None or len(dims) != x.rank:
            _fail("dims must list every axis")
        seen = [False] * x.rank
        shape = []
        for d in dims:
            a = _norm_axis(d, x.rank)
            if a < 0 or seen[a]:
                _fail("dims is not a permutation")
            seen[a] = True
            shape.append(x.shape[a])
        return TensorType(x.dtype, tuple(shape))
    if op == "expand":
        shape = _get_syms(attrs, "shape")
        if shape is None or len(shape) < x.rank:
            _fail("bad target shape")
        lead = len(shape) - x.rank
        for i, d in enumerate(x.shape):
            if d != shape[lead + i] and d != SymExpr(1):
                _fail(f"cannot expand {x} to {TensorType(x.dtype, shape)}")
        return TensorType(x.dtype, shape)
    if op == "slice":
        dim = _get_int(attrs, "dim")
        start, end = _get_syms(attrs, "start"), _get_syms(attrs, "end")
        step = _get_int(attrs, "step")
        step = 1 if step is None else step
        if dim is None or start is None or end is None or len(start) != 1 or len(end) != 1:
            _fail("needs attributes dim, start, end")
        a = _norm_axis(dim, x.rank)
        if a < 0:
            _fail("dim out of range")
        if step < 1:
            _fail("step must be positive")
        s, e = start[0], end[0]
        if not (provably_ge(s, 0) and provably_ge(e, s) and provably_ge(x.shape[a], e)):
            _fail(f"cannot prove 0 <= start <= end <= size on dim {a}")
        shape = list(x.shape)
        shape[a] = ceildiv(e - s, SymExpr(step))
        return TensorType(x.dtype, tuple(shape))
    if op == "cat":
        dim = _get_int(attrs, "dim")
        if dim is None:
            _fail("missing attribute dim")
        a = _norm_axis(dim, x.rank)
        if a < 0:
            _fail("dim out of range")
        shape = list(x.shape)
        for i in ins[1:]:
            t = g.tensor(i)
            if t.dtype != x.dtype or t.rank != x.rank:
                _fail("operands differ in type")
            for d in range(x.rank):
                if d != a and t.shape[d] != x.shape[d]:
                    _fail("operands differ off the cat dim")
            shape[a] = shape[a] + t.shape[a]
        return TensorType(x.dtype, tuple(shape))
    _fail("not a layout op")


def _index(g: Graph, op: str, ins, attrs) -> TensorType:
    x, idx = g.tensor(ins[0]), g.tensor(ins[1])
    dim = _get_int(attrs, "dim")
    if dim is None:
        _fail("missing attribute dim")
    a = _norm_axis(dim, x.rank)
    if a < 0:
        _fail("dim out of range")
    if idx.dtype not in (DType.I64, DType.I32) or idx.rank != 1:
        _fail(f"index must be a 1-D integer tensor, got {idx}")
    picked = list(x.shape)
    picked[a] = idx.shape[0]
    picked_t = TensorType(x.dtype, tuple(picked))
    if op == "index_select":
        return picked_t
    src = g.tensor(ins[2])
    if src.dtype != x.dtype or src.shape != picked_t.shape:
        _fail(f"source must be {picked_t}, got {src}")
    return x


def infer_type(g: Graph, op: str, inputs: list[int], attrs: dict) -> TensorType:
    """The result type of `op`; raises IRTypeError("<op>: <reason>") when it does not type."""
    info = OPS.get(op)
    if info is None:
        raise IRTypeError(f"unknown op {op}")
    n = len(inputs)
    try:
        if n < info.min_inputs or (info.max_inputs >= 0 and n > info.max_inputs):
            rng = ("" if info.max_inputs == info.min_inputs else
                   (" or more" if info.max_inputs < 0 else f" to {info.max_inputs}"))
            _fail(f"takes {info.min_inputs}{rng} operands, got {n}")
        for i in inputs:
            if not 0 <= i < len(g.values):
                _fail(f"operand %{i} does not exist")
            if g.values[i].is_sym:
                _fail(f"operand %{i} is not a tensor")
        cat = info.category
        if cat == Category.CREATE:
            dtype = _get_dtype(attrs, "dtype")
            if dtype is None:
                _fail("missing attribute dtype")
            if _get_float(attrs, "value") is None:
                _fail("missing attribute value")
            if op == "constant":
                return TensorType(dtype, ())
            shape = _get_syms(attrs, "shape")
            if shape is None:
                _fail("missing attribute shape")
            for d in shape:
                if d.bounds()[0] < 0:
                    _fail("shape may be negative")
            return TensorType(dtype, shape)
        if cat == Category.CAST:
            dtype = _get_dtype(attrs, "dtype")
            if dtype is None:
                _fail("missing attribute dtype")
            return TensorType(dtype, g.tensor(inputs[0]).shape)
        if cat in (Category.UNARY, Category.BINARY, Category.COMPARE, Category.WHERE):
            return _elementwise(g, op, inputs)
        if cat == Category.MATMUL:
            return _matmul(g, op, inputs)
        if cat == Category.REDUCE:
            return _reduce(g, op, inputs, attrs)
        if cat == Category.LAYOUT:
            return _layout(g, op, inputs, attrs)
        return _index(g, op, inputs, attrs)
    except _Fail as e:
        raise IRTypeError(f"{op}: {e}") from None
    except (OverflowError, ZeroDivisionError) as e:
        raise IRTypeError(f"{op}: {e}") from None
