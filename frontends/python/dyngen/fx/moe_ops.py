"""FX -> IR handlers for the grouped-experts primitives (torch.ops.dyngen.*, moe/ops.py), each
the IR op of the same name (Note [Grouped experts ops] in ir/shape_infer_grouped.cc), and for
index_copy, with which the grouped layer puts its rows back in token order. Registered into
registry.HANDLERS.

grouped_mm's `weights_nk` becomes the int attribute w_layout (0: weights [N, K], 1: [K, N]),
since IR attributes hold no strings; its weights are the op's inputs after a and offs, one fused
[E, ., .] tensor or one per expert.
"""

from __future__ import annotations

from ..errors import Unsupported
from .registry import register
from .values import Ref


def _num_experts(c, num_experts) -> int:
    if not isinstance(num_experts, int) or isinstance(num_experts, bool):
        raise Unsupported(f"op {c.node.target}: num_experts={num_experts!r} is not a constant")
    return num_experts


def expert_offsets(c, top_k_index, num_experts):
    attrs = {"num_experts": _num_experts(c, num_experts)}
    return c.op("expert_offsets", [c.tensor(top_k_index)], attrs)


def expert_order(c, top_k_index, num_experts):
    attrs = {"num_experts": _num_experts(c, num_experts)}
    return c.op("expert_order", [c.tensor(top_k_index)], attrs)


def grouped_mm(c, a, offs, weights, weights_nk=True):
    if not weights or not all(isinstance(w, Ref) for w in weights):
        raise Unsupported(f"op {c.node.target}: weights {weights!r}")
    inputs = [c.tensor(a), c.tensor(offs), *weights]
    return c.op("grouped_mm", inputs, {"w_layout": 0 if weights_nk else 1})


def grouped_mm_wgrad(c, g, x, offs):
    return c.op("grouped_mm_wgrad", [c.tensor(g), c.tensor(x), c.tensor(offs)])


def index_copy(c, x, dim, index, source):
    """x with x[index[i]] = source[i] along dim (each index written once by the grouped layer;
    with repeated indices, which write wins is unspecified, as in PyTorch)."""
    x = c.tensor(x)
    source = c.cast(c.tensor(source), c.type(x).dtype)
    return c.op("index_copy", [x, c.tensor(index), source], {"dim": int(dim) % c.type(x).rank})


register(
    {
        "dyngen.expert_offsets": expert_offsets,
        "dyngen.expert_order": expert_order,
        "dyngen.grouped_mm": grouped_mm,
        "dyngen.grouped_mm_wgrad": grouped_mm_wgrad,
        "index_copy": index_copy,
    }
)
