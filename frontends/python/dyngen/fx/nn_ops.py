"""FX -> IR handlers for the nn-level ops: gelu's tanh form and both gelu gradients, clamp,
constant_pad_nd, cumsum, flip, arange, logical ops, nll_loss forward and backward. Registered into
registry.HANDLERS.

Each is one IR op where the IR has one (gelu_tanh, gelu_backward, gelu_tanh_backward, cumsum,
gather, scatter) and a composition of IR ops otherwise; Note [Export checks every node against
PyTorch] checks every result's type either way.
"""

from __future__ import annotations

from ..core.ir import SymList, provably_ge
from ..core.ops import DType
from ..errors import Unsupported
from .registry import HANDLERS, register
from .values import Ref, meta_val


def _float_operand(c, x):
    """x as a float tensor: PyTorch's float ops promote integer inputs to the default dtype."""
    x = c.tensor(x)
    return x if c.type(x).dtype.is_float else c.cast(x, c.out_dtype())


def gelu(c, x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"op gelu with approximate={approximate!r}")
    return c.op("gelu" if approximate == "none" else "gelu_tanh", [_float_operand(c, x)])


def gelu_backward(c, grad, x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"op gelu_backward with approximate={approximate!r}")
    name = "gelu_backward" if approximate == "none" else "gelu_tanh_backward"
    return c.op(name, [c.tensor(grad), c.tensor(x)])


def float_unary(name):
    def h(c, x, *, out=None):
        return c.op(name, [_float_operand(c, x)])

    return h


def clamp(c, x, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    """clamp(x, lo, hi) = minimum(maximum(x, lo), hi): NaN in x stays NaN, and lo > hi gives hi,
    as in PyTorch."""
    if min is None and max is None:
        raise Unsupported("op clamp without min and max")
    r = c.tensor(x)
    if min is not None:
        r = c.op("maximum", [r, c.tensor(min)])
    if max is not None:
        r = c.op("minimum", [r, c.tensor(max)])
    return c.cast(r, c.out_dtype())


def clamp_min(c, x, lo):
    return clamp(c, x, min=lo)


def clamp_max(c, x, hi):
    return clamp(c, x, max=hi)


def cumsum(c, x, dim, *, dtype=None, out=None):
    t = c.type(x)
    return c.op("cumsum", [x], {"dim": int(dim) % max(t.rank, 1), "dtype": c.out_dtype()})


def constant_pad_nd(c, x, pad, value=0):
    """Pads (or, for negative amounts, trims) the last len(pad) // 2 dims: trims are slices,
    pads are cat with a full of `value`."""
    t = c.type(x)
    if len(pad) % 2 or len(pad) // 2 > t.rank:
        raise Unsupported(f"op constant_pad_nd with pad {pad!r}")
    r = x
    dtype = t.dtype
    fill = float(value) if dtype.is_float else int(value)
    for i in range(len(pad) // 2):
        dim = t.rank - 1 - i
        for side, amount in ((0, pad[2 * i]), (1, pad[2 * i + 1])):
            a = c.ex.sym(amount)
            if a == 0:
                continue
            size = c.type(r).shape[dim]
            if provably_ge(0, a):  # a trim of -a elements
                start, end = (-a, size) if side == 0 else (0, size + a)
                r = c.op(
                    "slice",
                    [r],
                    {"dim": dim, "start": SymList([start]), "end": SymList([end]), "step": 1},
                )
            elif provably_ge(a, 0):
                shape = list(c.type(r).shape)
                shape[dim] = a
                block = c.op("full", [], {"dtype": dtype, "shape": SymList(shape), "value": fill})
                r = c.op("cat", [block, r] if side == 0 else [r, block], {"dim": dim})
            else:
                raise Unsupported(f"op constant_pad_nd: pad amount {a} of unknown sign")
    return r


def _nll_parts(c, x, target, weight, ignore_index):
    """(x as [N, C], the safe target [N, 1], the per-row weight [N] in x's dtype (0 where the
    target is ignore_index), N). A 1-D x with a 0-d target is one row."""
    tx = c.type(x)
    if tx.rank == 1:
        x = c.reshape(x, (1, tx.shape[0]))
        target = c.reshape(target, (1,))
    elif tx.rank != 2:
        raise Unsupported("op nll_loss on more than 2 dims")
    n = c.type(x).shape[0]
    dtype = c.type(x).dtype
    keep = c.op("ne", [target, c.const(int(ignore_index))])
    safe = c.op("where", [keep, target, c.const(0)])
    if weight is None:
        w = c.cast(keep, dtype)
    else:
        picked_w = c.op("index_select", [weight, safe], {"dim": 0})
        w = c.op("where", [keep, picked_w, c.const(0.0, dtype)])
    return x, c.reshape(safe, (n, 1)), w, n


def nll_loss_forward(c, x, target, weight, reduction, ignore_index):
    """The sums and the mean's division run in f32 (f64 for f64) and round once, as PyTorch's
    reductions accumulate in their accumulation type."""
    x2, safe, w, n = _nll_parts(c, x, target, weight, ignore_index)
    dtype = c.type(x2).dtype
    acc = DType.F64 if dtype == DType.F64 else DType.F32
    picked = c.reshape(c.op("gather", [x2, safe], {"dim": 1}), (n,))
    losses = c.op("neg", [c.op("mul", [c.cast(picked, acc), c.cast(w, acc)])])
    if reduction == 0:  # none: total_weight is 0, as in PyTorch
        out = c.cast(losses, dtype)
        out = out if c.type(x).rank == 2 else c.reshape(out, ())
        return out, c.op("constant", [], {"dtype": dtype, "value": 0.0})
    total = c.op("sum", [c.cast(w, acc)], {"dims": (0,), "keepdim": 0})
    out = c.op("sum", [losses], {"dims": (0,), "keepdim": 0})
    if reduction == 1:
        out = c.op("div", [out, total])
    elif reduction != 2:
        raise Unsupported(f"op nll_loss with reduction={reduction}")
    return c.cast(out, dtype), c.cast(total, dtype)


def nll_loss_backward(c, grad, x, target, weight, reduction, ignore_index, total_weight):
    x2, safe, w, n = _nll_parts(c, x, target, weight, ignore_index)
    dtype = c.type(x2).dtype
    g = c.tensor(grad)
    if reduction == 0:
        g = c.reshape(g, (n,))
    elif reduction == 1:
        g = c.op("div", [g, total_weight])
    elif reduction != 2:
        raise Unsupported(f"op nll_loss_backward with reduction={reduction}")
    coef = c.cast(c.op("neg", [c.op("mul", [w, g])]), dtype)
    if tuple(c.type(coef).shape) != (n,):
        coef = c.op("expand", [coef], {"shape": SymList([n])})
    zeros = c.op("full", [], {"dtype": dtype, "shape": SymList(c.type(x2).shape), "value": 0.0})
    out = c.op("scatter", [zeros, safe, c.reshape(coef, (n, 1))], {"dim": 1})
    return c.reshape(out, c.out_shape())


def numel(c, shape):
    """The product of a shape's (symbolic) dims."""
    n = c.ex.b.const(1)
    for d in shape:
        n = n * d
    return n


def _iota(c, n) -> Ref:
    """0, 1, ..., n-1 as i64 (a running count of ones)."""
    ones = c.op("full", [], {"dtype": DType.I64, "shape": SymList([n]), "value": 1})
    return c.op("sub", [c.op("cumsum", [ones], {"dim": 0, "dtype": DType.I64}), c.const(1)])


def flip(c, x, dims):
    """x reversed along `dims`: index_select with the index size-1, ..., 0 (cumsum's gradient)."""
    t = c.type(x)
    r = x
    for d in dims:
        d = d % t.rank
        size = t.shape[d]
        rev = c.op("sub", [c.sym_scalar(size - 1, DType.I64), _iota(c, size)])
        r = c.op("index_select", [r, rev], {"dim": d})
    return r


def arange(c, *args, **kw):
    """arange(end) / arange(start, end[, step]): start + step * (0, 1, ...), the length from
    PyTorch. Integer results are exact; float ones are computed in f64 and rounded once."""
    start, step = (0, 1) if len(args) < 2 else (args[0], args[2] if len(args) > 2 else 1)
    start, step = kw.get("start", start), kw.get("step", step)
    (n,) = c.out_shape()
    dtype = c.out_dtype()
    r = _iota(c, n)
    if dtype.is_float:
        r = c.cast(r, DType.F64)
    if step != 1:
        r = c.op("mul", [r, c.const(step, DType.F64 if dtype.is_float else DType.I64)])
    if start != 0:
        r = c.op("add", [r, c.const(start, DType.F64 if dtype.is_float else DType.I64)])
    return c.cast(r, dtype)


def _as_bool(c, x):
    return c.cast(c.tensor(x), DType.BOOL)


def _count_true(c, a, b):
    return c.op("add", [c.cast(_as_bool(c, a), DType.I64), c.cast(_as_bool(c, b), DType.I64)])


def logical_and(c, a, b):
    return c.op("eq", [_count_true(c, a, b), c.const(2)])


def logical_or(c, a, b):
    return c.op("ge", [_count_true(c, a, b), c.const(1)])


def logical_xor(c, a, b):
    return c.op("eq", [_count_true(c, a, b), c.const(1)])


def logical_not(c, a):
    return c.op("eq", [_as_bool(c, a), c.const(False)])


def reduced_dims(rank: int, dim) -> list[int]:
    """A reduction's `dim` argument (an int, a list, or None / [] for every dim) as dims >= 0."""
    if isinstance(dim, int):
        dim = [dim]
    return list(range(rank)) if not dim else [d % max(rank, 1) for d in dim]


def var_mean(c, x, dim=None, *, correction=None, keepdim=False):
    """(variance, mean) over `dim`, computed in f32 for the half types (f64 for f64) and rounded
    once, as PyTorch accumulates."""
    t = c.type(x)
    dims = reduced_dims(t.rank, dim)
    correction = 1 if correction is None else correction
    acc = DType.F64 if t.dtype == DType.F64 else DType.F32
    xa = c.cast(c.tensor(x), acc)
    keep = {"dims": tuple(dims), "keepdim": 1}
    centered = c.op("sub", [xa, c.op("mean", [xa], keep)])
    attrs = {"dims": tuple(dims), "keepdim": int(bool(keepdim))}
    var = c.op("mean", [c.op("mul", [centered, centered])], attrs)
    if correction:  # the sum of squares over count - correction (PyTorch: inf/nan when <= 0)
        count = t.shape[dims[0]]
        for d in dims[1:]:
            count = count * t.shape[d]
        n = c.sym_scalar(count, acc)
        var = c.op("div", [c.op("mul", [var, n]), c.op("sub", [n, c.const(correction, acc)])])
    mean = c.op("mean", [xa], attrs)
    return c.cast(var, t.dtype), c.cast(mean, t.dtype)


def split_with_sizes(c, x, split_sizes, dim=0):
    """Consecutive slices of `dim`, whose sizes may be symbolic."""
    take = HANDLERS["slice"]
    start, outs = c.ex.sym(0), []
    for size in split_sizes:
        end = start + c.ex.sym(size)
        outs.append(take(c, x, dim, start, end))
        start = end
    return tuple(outs)


def split(c, x, split_size, dim=0):
    """torch.split / chunk (aten.split.Tensor): slices of split_size along dim, the last one
    shorter; a list of sizes is split_with_sizes."""
    if isinstance(split_size, (list, tuple)):
        return split_with_sizes(c, x, split_size, dim)
    pieces = meta_val(c.node)
    if not isinstance(pieces, (list, tuple)):
        raise Unsupported("op split: no metadata for its pieces")
    return split_with_sizes(c, x, [p.shape[dim] for p in pieces], dim)


def sgn(c, x):
    """-1, 0 or 1 in x's dtype; NaN stays NaN, as in PyTorch."""
    x = c.tensor(x)
    dtype = c.type(x).dtype
    zero = c.const(0, dtype)
    sign = c.op("sub", [c.cast(c.op("gt", [x, zero]), dtype), c.cast(c.op("lt", [x, zero]), dtype)])
    if not dtype.is_float:
        return sign
    return c.op("where", [c.op("ne", [x, x]), x, sign])


def linalg_vector_norm(c, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The 1-, 2- and inf-norms over `dim`, accumulated in f32 for the half types (f64 for f64)
    and rounded once."""
    if dtype is not None:
        raise Unsupported("op linalg_vector_norm with dtype=")
    x = _float_operand(c, x)
    t = c.type(x)
    attrs = {"dims": tuple(reduced_dims(t.rank, dim)), "keepdim": int(bool(keepdim))}
    acc = DType.F64 if t.dtype == DType.F64 else DType.F32
    xa = c.cast(x, acc)
    if ord == 1:
        out = c.op("sum", [c.op("abs", [xa])], attrs)
    elif ord == 2:
        out = c.op("sqrt", [c.op("sum", [c.op("mul", [xa, xa])], attrs)])
    elif ord == float("inf"):
        out = c.op("amax", [c.op("abs", [xa])], attrs)
    else:
        raise Unsupported(f"op linalg_vector_norm with ord={ord!r}")
    return c.cast(out, t.dtype)


_TABLE = {
    "var_mean": var_mean,
    "split_with_sizes": split_with_sizes,
    "split": split,
    "sgn": sgn,
    "sign": sgn,
    "linalg_vector_norm": linalg_vector_norm,
    "arange": arange,
    "flip": flip,
    "logical_and": logical_and,
    "logical_or": logical_or,
    "logical_xor": logical_xor,
    "logical_not": logical_not,
    "gelu": gelu,
    "gelu_backward": gelu_backward,
    "sin": float_unary("sin"),
    "cos": float_unary("cos"),
    "erf": float_unary("erf"),
    "sinc": float_unary("sinc"),
    "clamp": clamp,
    "clip": clamp,
    "clamp_min": clamp_min,
    "clamp_max": clamp_max,
    "cumsum": cumsum,
    "constant_pad_nd": constant_pad_nd,
    "nll_loss_forward": nll_loss_forward,
    "nll_loss_backward": nll_loss_backward,
}
RESULT_TYPED = {"cumsum", "arange"}  # their dtype= keyword is read from the result's FakeTensor
register(_TABLE)
