"""FX -> IR handlers for CPU's attention kernel, `_scaled_dot_product_flash_attention_for_cpu`
and its backward: what `F.scaled_dot_product_attention` without a mask becomes in an ATen graph
on the CPU. Registered into registry.HANDLERS.

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
"""

from __future__ import annotations

import math

from ..core.ops import DType
from ..errors import Unsupported
from .nn_ops import _iota
from .registry import register

F32 = DType.F32


def _check(c, dropout_p, attn_mask):
    if dropout_p:
        raise Unsupported("op scaled_dot_product_attention with dropout")
    if attn_mask is not None:
        raise Unsupported("op scaled_dot_product_attention with an attn_mask")


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


def _scores(c, h, q5, k5, scale, is_causal):
    """Q K^T scale, [B, Hkv, G, L, S], -inf where the causal mask hides a key."""
    s = c.op("mul", [c.op("matmul", [q5, _t(c, k5)]), c.const(scale, F32)])
    if not is_causal:
        return s
    rows = c.reshape(_iota(c, h.l), (h.l, 1))
    cols = c.reshape(_iota(c, h.s), (1, h.s))
    keep = c.op("le", [cols, rows])
    return c.op("where", [keep, s, c.const(float("-inf"), F32)])


def _scale(h, scale):
    if scale is not None:
        return float(scale)
    e = h.e.as_const()
    if e is None:
        raise Unsupported("op scaled_dot_product_attention: symbolic head size without a scale")
    return 1.0 / math.sqrt(e)


def flash_attention_cpu(c, q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    _check(c, dropout_p, attn_mask)
    h = _Heads(c, q, k)
    sc = _scale(h, scale)
    q5, k5, v5 = h.grouped(c, q, h.l), h.grouped(c, k, h.s), h.grouped(c, v, h.s)
    s = _scores(c, h, q5, k5, sc, is_causal)
    last = {"dims": (4,), "keepdim": 1}
    m = c.op("amax", [s], last)
    p = c.op("exp", [c.op("sub", [s, m])])
    total = c.op("sum", [p], last)
    lse = c.op("add", [m, c.op("log", [total])])
    out = c.op("matmul", [c.op("div", [p, total]), v5])
    out = h.ungrouped(c, out, h.hq, h.l, c.type(q).dtype)
    return out, c.reshape(lse, (h.b, h.hq, h.l))


def flash_attention_cpu_backward(
    c, grad_out, q, k, v, out, logsumexp, dropout_p, is_causal, *, attn_mask=None, scale=None
):
    _check(c, dropout_p, attn_mask)
    h = _Heads(c, q, k)
    sc = _scale(h, scale)
    q5, k5, v5 = h.grouped(c, q, h.l), h.grouped(c, k, h.s), h.grouped(c, v, h.s)
    do5, o5 = h.grouped(c, grad_out, h.l), h.grouped(c, out, h.l)
    lse = c.reshape(c.cast(logsumexp, F32), (h.b, h.hkv, h.g, h.l, 1))
    p = c.op("exp", [c.op("sub", [_scores(c, h, q5, k5, sc, is_causal), lse])])
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


_TABLE = {
    "_scaled_dot_product_flash_attention_for_cpu": flash_attention_cpu,
    "_scaled_dot_product_flash_attention_for_cpu_backward": flash_attention_cpu_backward,
}
register(_TABLE)
