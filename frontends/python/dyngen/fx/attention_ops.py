"""FX -> IR handlers for CPU's attention kernel, `_scaled_dot_product_flash_attention_for_cpu`
and its backward: what `F.scaled_dot_product_attention` becomes in an ATen graph on the CPU; and
the ops transformers 5's mask builders add before it (`bitwise_and` / `bitwise_or` of bools, index
tensors that broadcast). Registered into registry.HANDLERS.

Note [Attention by composition]
Both are written with catalog ops (batched matmul, amax, exp, sum), in f32 whatever the input
dtype, rounded once at the end, as the CPU kernel accumulates. Grouped-query attention (fewer key
and value heads than query heads) runs on a view of the query heads as [B, Hkv, G, L, E], against
keys and values broadcast over G, so no key or value is copied. The causal mask keeps key
position j for query position i when j <= i (PyTorch's top-left alignment). The forward returns
the output and the row log-sum-exp (the kernel's second result, which its backward reads); the
backward recomputes the probabilities P = exp(Q K^T scale - lse) and gives
dV = P^T dO, dS = P (dO V^T - rowsum(dO O)), dQ = dS K scale, dK = dS^T Q scale (dK and dV summed
over the query heads of their group).

Note [Attention masks]
transformers 5 builds its causal mask as a graph value (Note [Index tensors that broadcast]), a
bool [1|B, 1, S, S]; `F.scaled_dot_product_attention` turns it into an additive one in the query's
dtype (0 kept, -inf hidden) before the CPU kernel, which adds it, in f32, to Q K^T scale. Both
kinds are lowered: a float mask is added, a bool one keeps a score where it is True. The mask's
head dim is 1 or the query heads (then seen as [Hkv, G] like the query); its other dims broadcast.
A row with every key hidden gives what the kernel gives: a zero output and a log-sum-exp of 0 (the
row's max taken as 0 and its sum as 1), so the backward's P = exp(-inf - 0) is 0, not NaN.
"""

from __future__ import annotations

import math

from ..core.ir import SymList
from ..core.ops import DType
from ..errors import Unsupported
from .nn_ops import _iota, logical_and, logical_or, logical_xor
from .registry import register

F32 = DType.F32


def _check(c, dropout_p):
    if dropout_p:
        raise Unsupported("op scaled_dot_product_attention with dropout")


class _Heads:
    """The shapes of one attention call: q [B, Hq, L, E], k and v [B, Hkv, S, E]."""

    def __init__(self, c, q, k):
        qt, kt = c.type(q), c.type(k)
        if qt.rank != 4 or kt.rank != 4:
            raise Unsupported("op scaled_dot_product_attention on other than 4-d q, k, v")
        self.b, self.hq, self.l, self.e = qt.shape
        self.hkv, self.s = kt.shape[1], kt.shape[2]
        hq, hkv = self.hq.as_const(), self.hkv.as_const()
        if self.hq == self.hkv:
            self.g = 1
        elif hq is None or hkv is None or hkv == 0 or hq % hkv:
            raise Unsupported(
                "op scaled_dot_product_attention: head counts must be equal, or "
                "constants with the query's a multiple of the key's"
            )
        else:
            self.g = hq // hkv

    def grouped(self, c, x, rows):
        """x [B, H, rows, E] in f32 as [B, Hkv, G or 1, rows, E]."""
        h = c.type(x).shape[1]
        per = self.g if h == self.hq else 1
        return c.reshape(c.cast(x, F32), (self.b, self.hkv, per, rows, c.type(x).shape[3]))

    def ungrouped(self, c, x, heads, rows, dtype):
        return c.cast(c.reshape(x, (self.b, heads, rows, c.type(x).shape[-1])), dtype)


def _t(c, x):
    """x with its last two dims swapped."""
    r = c.type(x).rank
    return c.op("permute", [x], {"dims": tuple(range(r - 2)) + (r - 1, r - 2)})


def _mask5(c, h, attn_mask):
    """The mask as [B|1, Hkv|1, G|1, L|1, S|1] (Note [Attention masks])."""
    mt = c.type(attn_mask)
    if mt.rank > 4:
        raise Unsupported("op scaled_dot_product_attention: an attn_mask of rank above 4")
    b, heads, rows, cols = [c.ex.b.const(1)] * (4 - mt.rank) + list(mt.shape)
    if heads.as_const() == 1:
        return c.reshape(attn_mask, (b, 1, 1, rows, cols))
    if heads == h.hq:
        return c.reshape(attn_mask, (b, h.hkv, h.g, rows, cols))
    raise Unsupported("op scaled_dot_product_attention: an attn_mask's heads neither 1 nor Hq")


def _scores(c, h, q5, k5, scale, is_causal, attn_mask):
    """Q K^T scale, [B, Hkv, G, L, S], -inf where the causal mask hides a key, plus the attn_mask
    (Note [Attention masks])."""
    s = c.op("mul", [c.op("matmul", [q5, _t(c, k5)]), c.const(scale, F32)])
    if attn_mask is not None:
        m = _mask5(c, h, attn_mask)
        if c.type(m).dtype == DType.BOOL:
            s = c.op("where", [m, s, c.const(float("-inf"), F32)])
        else:
            s = c.op("add", [s, c.cast(m, F32)])
    if not is_causal:
        return s
    rows = c.reshape(_iota(c, h.l), (h.l, 1))
    cols = c.reshape(_iota(c, h.s), (1, h.s))
    keep = c.op("le", [cols, rows])
    return c.op("where", [keep, s, c.const(float("-inf"), F32)])


def _if_eq(c, x, value, replacement):
    """x with `replacement` where x == value (a row with every key hidden)."""
    return c.op("where", [c.op("eq", [x, c.const(value, F32)]), c.const(replacement, F32), x])


def _scale(h, scale):
    if scale is not None:
        return float(scale)
    e = h.e.as_const()
    if e is None:
        raise Unsupported("op scaled_dot_product_attention: symbolic head size without a scale")
    return 1.0 / math.sqrt(e)


def flash_attention_cpu(c, q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    _check(c, dropout_p)
    h = _Heads(c, q, k)
    sc = _scale(h, scale)
    q5, k5, v5 = h.grouped(c, q, h.l), h.grouped(c, k, h.s), h.grouped(c, v, h.s)
    s = _scores(c, h, q5, k5, sc, is_causal, attn_mask)
    last = {"dims": (4,), "keepdim": 1}
    m = c.op("amax", [s], last)
    if attn_mask is not None:  # a row may hide every key (Note [Attention masks])
        m = _if_eq(c, m, float("-inf"), 0.0)
    p = c.op("exp", [c.op("sub", [s, m])])
    total = c.op("sum", [p], last)
    if attn_mask is not None:
        total = _if_eq(c, total, 0.0, 1.0)
    lse = c.op("add", [m, c.op("log", [total])])
    out = c.op("matmul", [c.op("div", [p, total]), v5])
    out = h.ungrouped(c, out, h.hq, h.l, c.type(q).dtype)
    return out, c.reshape(lse, (h.b, h.hq, h.l))


def flash_attention_cpu_backward(
    c, grad_out, q, k, v, out, logsumexp, dropout_p, is_causal, *, attn_mask=None, scale=None
):
    _check(c, dropout_p)
    h = _Heads(c, q, k)
    sc = _scale(h, scale)
    q5, k5, v5 = h.grouped(c, q, h.l), h.grouped(c, k, h.s), h.grouped(c, v, h.s)
    do5, o5 = h.grouped(c, grad_out, h.l), h.grouped(c, out, h.l)
    lse = c.reshape(c.cast(logsumexp, F32), (h.b, h.hkv, h.g, h.l, 1))
    p = c.op("exp", [c.op("sub", [_scores(c, h, q5, k5, sc, is_causal, attn_mask), lse])])
    group = {"dims": (2,), "keepdim": 0}
    dv = c.op("sum", [c.op("matmul", [_t(c, p), do5])], group)
    dp = c.op("matmul", [do5, _t(c, v5)])
    rowsum = c.op("sum", [c.op("mul", [do5, o5])], {"dims": (4,), "keepdim": 1})
    ds = c.op("mul", [c.op("mul", [p, c.op("sub", [dp, rowsum])]), c.const(sc, F32)])
    dq = c.op("matmul", [ds, k5])
    dk = c.op("sum", [c.op("matmul", [_t(c, ds), q5])], group)
    return (
        h.ungrouped(c, dq, h.hq, h.l, c.type(q).dtype),
        h.ungrouped(c, dk, h.hkv, h.s, c.type(k).dtype),
        h.ungrouped(c, dv, h.hkv, h.s, c.type(v).dtype),
    )


# ---- the mask builders' ops --------------------------------------------------------------------


def _bitwise(name, logical):
    """bitwise_and / bitwise_or / bitwise_xor of bools (transformers 5's and_masks / or_masks
    combine mask functions with `&` and `|`); the IR has no integer bitwise ops."""

    def h(c, a, b):
        if c.out_dtype() != DType.BOOL:
            raise Unsupported(f"op {name} on {c.out_dtype().name.lower()} (only bool is lowered)")
        return logical(c, a, b)

    return h


# Note [Index tensors that broadcast]
# transformers 5's mask functions read per-position values with index tensors shaped for the
# [B, H, Lq, Lkv] mask: `position_ids[batch_idx, q_idx]` with batch_idx [B, 1, 1, 1] and q_idx
# [1, 1, Lq, 1] (aten.index.Tensor), a result of their broadcast shape [B, 1, Lq, 1]. Each index
# tensor expanded to that shape reads as the index tensors of one shape that basic_ops' indexing
# lowers (flattened into one linear index); basic_ops' `index` calls this before it.


def broadcast_index_tensors(c, idxs: list) -> list:
    """Integer index tensors expanded to their common broadcast shape (unchanged when they
    already share one, or when one is a bool mask: basic_ops refuses those)."""
    types = [c.type(i) for i in idxs]
    if len(idxs) < 2 or any(t.dtype == DType.BOOL for t in types):
        return idxs
    if all(tuple(t.shape) == tuple(types[0].shape) for t in types):
        return idxs
    rank = max(t.rank for t in types)
    padded = [[c.ex.b.const(1)] * (rank - t.rank) + list(t.shape) for t in types]
    shape = []
    for dims in zip(*padded):
        sizes = {d for d in dims if d.as_const() != 1}
        if len(sizes) > 1:
            raise Unsupported("op index: index tensors whose shapes do not broadcast")
        shape.append(sizes.pop() if sizes else dims[0])
    out = []
    for i, dims in zip(idxs, padded):
        i = c.reshape(i, dims)
        if tuple(dims) != tuple(shape):
            i = c.op("expand", [i], {"shape": SymList(shape)})
        out.append(i)
    return out


_TABLE = {
    "_scaled_dot_product_flash_attention_for_cpu": flash_attention_cpu,
    "_scaled_dot_product_flash_attention_for_cpu_backward": flash_attention_cpu_backward,
    "bitwise_and": _bitwise("bitwise_and", logical_and),
    "bitwise_or": _bitwise("bitwise_or", logical_or),
    "bitwise_xor": _bitwise("bitwise_xor", logical_xor),
}
register(_TABLE)
