"""FX -> IR handlers for the selection ops that MoE routers use: gather, scatter (value and src),
scatter_add, max/min along a dim, topk. Registered into registry.HANDLERS.

gather, scatter and topk (the indices; the values are a gather) are catalog ops; the others are
compositions of catalog ops, so they compile once for every size like the rest of the graph.

Note [Arg-max by composition]
max(x, dim) returns the values (amax) and the index of the first maximum, as PyTorch does: the
index is the smallest position whose value equals the maximum, taken as -amax(-candidate) over an
i64 candidate that is the position where x hits the maximum and the dim's size elsewhere. NaN is
the maximum when present (amax propagates it), and a position hits when it is NaN too. topk(k)
was k such picks, each excluding the positions already taken; the IR's `topk` op gives the same
order in one kernel (Note [Top-k op] in ir/shape_infer.cc): the NaNs first, then descending
values, a tie (-inf and the dtype's lowest included) by the lower index, k distinct indices.
"""

from __future__ import annotations

from ..core.ir import SymExpr, SymList, provably_ge
from ..core.ops import DType
from ..errors import Unsupported
from .nn_ops import _iota, logical_and, logical_not, logical_or, numel
from .registry import register
from .values import Ref

# The IR's kTopkMaxK (ir/shape_infer.h): the kernel keeps k candidates per row in registers;
# beyond this a sort would be the right tool.
TOPK_MAX_K = 16


def _dim(c, x, dim) -> int:
    return int(dim) % max(c.type(x).rank, 1)


def gather(c, x, dim, index, *, sparse_grad=False):
    x = c.tensor(x)
    return c.op("gather", [x, c.tensor(index)], {"dim": _dim(c, x, dim)})


def _scatter_src(c, x, index, src):
    """src as a tensor of x's dtype and of index's shape (PyTorch reads only that corner)."""
    it, xt = c.type(index), c.type(x)
    if not isinstance(src, Ref):  # scatter.value: a Python scalar written everywhere
        return c.op(
            "full",
            [],
            {
                "dtype": xt.dtype,
                "shape": SymList(it.shape),
                "value": float(src) if xt.dtype.is_float else int(src),
            },
        )
    src = c.cast(c.tensor(src), xt.dtype)
    st = c.type(src)
    for d in range(it.rank):
        if st.shape[d] != it.shape[d]:
            if not provably_ge(st.shape[d], it.shape[d]):
                raise Unsupported("op scatter: cannot prove src is at least index's size")
            src = c.op(
                "slice",
                [src],
                {"dim": d, "start": SymList([0]), "end": SymList([it.shape[d]]), "step": 1},
            )
    return src


def scatter(c, x, dim, index, src, *, reduce=None):
    if reduce is not None:
        raise Unsupported(f"op scatter with reduce={reduce!r}")
    x, index = c.tensor(x), c.tensor(index)
    return c.op("scatter", [x, index, _scatter_src(c, x, index, src)], {"dim": _dim(c, x, dim)})


def _iota_along(c, shape, d):
    """The position along dim d, as i64 broadcast to `shape`."""
    ones = [1] * len(shape)
    ones[d] = shape[d]
    pos = c.reshape(_iota(c, shape[d]), ones)
    return c.op("expand", [pos], {"shape": SymList(shape)})


def scatter_add(c, x, dim, index, src):
    """x with src added at the indexed positions: the per-element index made a linear index into
    x flattened, then one index_add (which accumulates in f32 and poisons an out-of-range index,
    Note [Out-of-range indices]; an index outside its own dim is made out of range of the whole,
    so it cannot land in a neighbouring row)."""
    x, index = c.tensor(x), c.tensor(index)
    xt, it = c.type(x), c.type(index)
    if xt.rank == 0:
        raise Unsupported("op scatter_add on a 0-d tensor")
    d = _dim(c, x, dim)
    src = _scatter_src(c, x, index, src)
    strides = [c.ex.b.const(1)] * xt.rank
    for k in range(xt.rank - 2, -1, -1):
        strides[k] = strides[k + 1] * xt.shape[k + 1]
    n_x = numel(c, xt.shape)
    size = c.sym_scalar(xt.shape[d], DType.I64)
    idx = c.cast(index, DType.I64)
    wrapped = c.op("where", [c.op("lt", [idx, c.const(0)]), c.op("add", [idx, size]), idx])
    bad = logical_not(
        c, logical_and(c, c.op("ge", [wrapped, c.const(0)]), c.op("lt", [wrapped, size]))
    )
    lin = None
    for k in range(xt.rank):
        term = wrapped if k == d else _iota_along(c, list(it.shape), k)
        if strides[k].as_const() != 1:
            term = c.op("mul", [term, c.sym_scalar(strides[k], DType.I64)])
        lin = term if lin is None else c.op("add", [lin, term])
    never = c.op("neg", [c.sym_scalar(n_x + n_x + 1, DType.I64)])  # wraps to < 0 still
    lin = c.op("where", [bad, never, lin])
    n_idx = numel(c, it.shape)
    out = c.op(
        "index_add",
        [c.reshape(x, (n_x,)), c.reshape(lin, (n_idx,)), c.reshape(src, (n_idx,))],
        {"dim": 0},
    )
    return c.reshape(out, tuple(xt.shape))


def _first_max(c, x, d):
    """(the max along d, kept as a dim of 1, and the i64 index of its first position)
    (Note [Arg-max by composition])."""
    t = c.type(x)
    keep = {"dims": (d,), "keepdim": 1}
    m = c.op("amax", [x], keep)
    hit = c.op("eq", [x, m])
    if t.dtype.is_float:
        hit = logical_or(c, hit, c.op("ne", [x, x]))
    pos = _iota_along(c, list(t.shape), d)
    cand = c.op("where", [hit, pos, c.sym_scalar(t.shape[d], DType.I64)])
    first = c.op("neg", [c.op("amax", [c.op("neg", [cand])], keep)])
    return m, first


def _drop_dim(c, r, d, keepdim):
    if keepdim:
        return r
    shape = list(c.type(r).shape)
    return c.reshape(r, shape[:d] + shape[d + 1 :])


def max_(c, x, dim=None, keepdim=False):
    """max(x) (every element), max(x, other) (elementwise) and max(x, dim) (values, indices)."""
    x = c.tensor(x)
    if dim is None:
        return c.op("amax", [x], {"dims": tuple(range(c.type(x).rank)), "keepdim": 0})
    if isinstance(dim, Ref):
        return c.op("maximum", [x, dim])
    if c.type(x).rank == 0:
        return x, c.const(0)
    d = _dim(c, x, dim)
    m, first = _first_max(c, x, d)
    return _drop_dim(c, m, d, keepdim), _drop_dim(c, first, d, keepdim)


# Note [Top-k ties]
# Among equal values dyngen's top-k (the IR's `topk` op, Note [Top-k op] in ir/shape_infer.cc)
# takes the lower index first, as a stable descending sort would: the same answer on every
# executor and every call. PyTorch does not specify an order for ties, and its CPU top-k leaves
# them as its partial sort happens to (experts 51, 57, 4 for three equal router probabilities,
# where dyngen says 4, 51, 57). The values are the same; the indices
# differ only within a run of equal values, so a tie across the k-th place can route a token to
# another expert than eager's. A bf16 router makes such ties common (tiny OLMoE: a few tokens a
# step). The training checks count the experts tied at the k-th place as routed apart:
# Note [Routing flips] in tests/ddp/fsdp2_lora.py. PyTorch's order is not copied, as it documents
# none to copy.
def topk(c, x, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - PyTorch's argument names
    """The k largest along `dim`, in descending order (also a valid answer for sorted=False);
    ties keep the lower index first (Note [Top-k ties])."""
    if not largest:
        raise Unsupported("op topk with largest=False")
    if isinstance(k, SymExpr) and k.as_const() is not None:
        k = k.as_const()
    if not isinstance(k, int) or not 0 <= k <= TOPK_MAX_K:
        raise Unsupported(f"op topk with k={k!r} (a constant k <= {TOPK_MAX_K} is supported)")
    x = c.tensor(x)
    t = c.type(x)
    d = _dim(c, x, dim)
    if t.rank == 0 or not provably_ge(t.shape[d], k):
        raise Unsupported(f"op topk: cannot prove k={k} <= the dim's size")
    if k == 0:
        shape = list(t.shape)
        shape[d] = 0
        zero = 0.0 if t.dtype.is_float else 0
        return (
            c.op("full", [], {"dtype": t.dtype, "shape": SymList(shape), "value": zero}),
            c.op("full", [], {"dtype": DType.I64, "shape": SymList(shape), "value": 0}),
        )
    last = t.rank - 1
    if d != last:  # the op works along the last dim: swap d there and back (a swap undoes itself)
        perm = list(range(t.rank))
        perm[d], perm[last] = last, d
        x = c.op("permute", [x], {"dims": tuple(perm)})
    indices = c.op("topk", [x], {"k": k})
    values = c.op("gather", [x, indices], {"dim": last})
    if d != last:
        values = c.op("permute", [values], {"dims": tuple(perm)})
        indices = c.op("permute", [indices], {"dims": tuple(perm)})
    return values, indices


def _triangle(c, x, diagonal: int, upper: bool):
    """x where column - row >= diagonal (triu) or <= diagonal (tril) over the last two dims, 0
    elsewhere (an eager attention's causal mask)."""
    x = c.tensor(x)
    t = c.type(x)
    if t.rank < 2:
        raise Unsupported(f"op {'triu' if upper else 'tril'} on a {t.rank}-d tensor")
    shape = list(t.shape)
    above = c.op("sub", [_iota_along(c, shape, t.rank - 1), _iota_along(c, shape, t.rank - 2)])
    keep = c.op("ge" if upper else "le", [above, c.const(int(diagonal))])
    return c.op("where", [keep, x, c.const(0, t.dtype)])


def triu(c, x, diagonal=0):
    return _triangle(c, x, diagonal, upper=True)


def tril(c, x, diagonal=0):
    return _triangle(c, x, diagonal, upper=False)


_TABLE = {
    "triu": triu,
    "tril": tril,
    "gather": gather,
    "scatter": scatter,
    "scatter_add": scatter_add,
    "max": max_,
    "topk": topk,
}


def embedding(c, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """weight's rows picked by indices of any shape (padding_idx matters to the gradient only)."""
    weight, indices = c.tensor(weight), c.tensor(indices)
    it = c.type(indices)
    rows = c.op("index_select", [weight, c.reshape(indices, (numel(c, it.shape),))], {"dim": 0})
    return c.reshape(rows, tuple(it.shape) + (c.type(weight).shape[1],))


def embedding_dense_backward(c, grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """The weight's gradient: each row of grad added into the row its index names (index_add,
    f32 accumulation), rows at padding_idx left 0."""
    if scale_grad_by_freq:
        raise Unsupported("op embedding_dense_backward with scale_grad_by_freq=True")
    grad, indices = c.tensor(grad), c.tensor(indices)
    it, gt = c.type(indices), c.type(grad)
    n = numel(c, it.shape)
    dim = gt.shape[-1]
    idx = c.reshape(indices, (n,))
    rows = c.reshape(grad, (n, dim))
    if padding_idx is not None:  # -1 (none) matches no index, as indices are >= 0
        keep = c.op("ne", [idx, c.const(padding_idx, DType.I64)])
        rows = c.op("where", [c.reshape(keep, (n, 1)), rows, c.const(0.0, gt.dtype)])
    zeros = c.op(
        "full",
        [],
        {"dtype": gt.dtype, "shape": SymList([c.ex.sym(num_weights), dim]), "value": 0.0},
    )
    return c.op("index_add", [zeros, idx, rows], {"dim": 0})


_TABLE.update({"embedding": embedding, "embedding_dense_backward": embedding_dense_backward})
register(_TABLE)
