"""FX -> IR handlers for the grouped-experts primitives (torch.ops.dyngen.*, moe/ops.py), each
the IR op of the same name (Note [Grouped experts ops] in ir/shape_infer_grouped.cc), and for
index_copy, with which the grouped layer puts its rows back in token order, and for PyTorch's own
aten._grouped_mm (Note [torch._grouped_mm lowering]), and for baddbmm, with which PEFT forms
LoRA'd fused expert weights. Registered into registry.HANDLERS.

grouped_mm's `weights_nk` becomes the int attribute w_layout (0: weights [N, K], 1: [K, N]),
since IR attributes hold no strings; its weights are the op's inputs after a and offs, one fused
[E, ., .] tensor or one per expert.
"""

from __future__ import annotations

import torch
import torch.fx

from ..core.ops import DType
from ..errors import Unsupported
from .registry import register
from .values import Ref, dtype_of, meta_val


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


def _swaps_last_two(n) -> bool:
    """Whether FX node n is a transpose of its input's last two dims (transpose, permute, t)."""
    if not isinstance(n, torch.fx.Node) or n.op != "call_function" or not n.args:
        return False
    src = meta_val(n.args[0])
    if not isinstance(src, torch.Tensor) or src.dim() < 2:
        return False
    r = src.dim()
    swap = list(range(r - 2)) + [r - 1, r - 2]
    name = getattr(getattr(n.target, "overloadpacket", n.target), "__name__", "")
    if name == "transpose" and len(n.args) == 3:
        return sorted((n.args[1] % r, n.args[2] % r)) == [r - 2, r - 1]
    if name == "permute" and len(n.args) == 2:
        return [d % r for d in n.args[1]] == swap
    return name == "t" and r == 2


def _operand(c, i: int, name: str):
    """The FX node of _grouped_mm's operand i (positional or by keyword)."""
    args = c.node.args
    return args[i] if len(args) > i else c.node.kwargs.get(name)


def aten_grouped_mm(c, mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    """Note [torch._grouped_mm lowering]

    aten._grouped_mm(mat_a, mat_b, offs) (transformers 5's grouped_mm experts, and its backward)
    in the two forms that take offs:
      2-D x 3-D: a [R, K], b [E, K, N] -> [R, N]: rows offs[e-1] <= r < offs[e] times b[e].
        This is our grouped_mm with one fused weight: w_layout 1 ("kn"), or, when b is FX's
        transpose of a [E, N, K] value (what transformers passes: `w.transpose(-2, -1)`, a view
        whose strides are those of [E, N, K]), that value with w_layout 0 ("nk"), so no
        transposed copy is made.
      2-D x 2-D: a [K, R], b [R, N] -> [E, K, N]: out[e] = a[:, seg e] @ b[seg e] (the weight
        gradient). That is grouped_mm_wgrad(a^T [R, K], b [R, N]), with a^T read through a's
        transpose when a is one.
    offs are int32 and inclusive group ends (our offs, Note [Grouped experts ops]). Past the
    last offset PyTorch leaves rows uninitialized (garbage on CPU too); ours are zero, and an
    expert whose wgrad segment is empty gets zeros as in PyTorch. Batched forms (no offs), bias
    and out_dtype are not lowered."""
    if offs is None or bias is not None:
        raise Unsupported(f"op {c.node.target}: only the offs form without bias is lowered")
    a, b = c.tensor(mat_a), c.tensor(mat_b)
    if out_dtype is not None and dtype_of(out_dtype, "out_dtype") != c.type(a).dtype:
        raise Unsupported(f"op {c.node.target}: out_dtype {out_dtype} differs from the inputs'")
    ra, rb = c.type(a).rank, c.type(b).rank
    a_node, b_node = _operand(c, 0, "self"), _operand(c, 1, "mat2")
    if ra == 2 and rb == 3:
        if _swaps_last_two(b_node) and isinstance(c.ex.env.get(b_node.args[0]), Ref):
            return c.op(
                "grouped_mm", [a, c.tensor(offs), c.ex.env[b_node.args[0]]], {"w_layout": 0}
            )
        return c.op("grouped_mm", [a, c.tensor(offs), b], {"w_layout": 1})
    if ra == 2 and rb == 2:
        if _swaps_last_two(a_node) and isinstance(c.ex.env.get(a_node.args[0]), Ref):
            a_t = c.ex.env[a_node.args[0]]
        else:
            a_t = c.op("permute", [a], {"dims": (1, 0)})
        return c.op("grouped_mm_wgrad", [a_t, b, c.tensor(offs)])
    raise Unsupported(f"op {c.node.target}: a rank {ra} x b rank {rb} with offs is not lowered")


def baddbmm(c, x, batch1, batch2, *, beta=1, alpha=1):
    """beta x + alpha (batch1 @ batch2): PEFT's LoRA on fused experts (ParamWrapper) forms each
    expert's weight W + scaling B_e A_e this way. The half types are computed in f32 and rounded
    once, as PyTorch's CPU and cuBLAS kernels accumulate."""
    dtype = c.out_dtype()
    acc = DType.F32 if dtype in (DType.BF16, DType.F16) else dtype
    prod = c.op("matmul", [c.cast(c.tensor(batch1), acc), c.cast(c.tensor(batch2), acc)])
    if alpha != 1:
        prod = c.op("mul", [prod, c.const(alpha, acc)])
    if beta == 0:  # x is ignored, NaN included, as in PyTorch
        return c.cast(prod, dtype)
    x = c.cast(c.tensor(x), acc)
    if beta != 1:
        x = c.op("mul", [x, c.const(beta, acc)])
    return c.cast(c.op("add", [prod, x]), dtype)


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
        "baddbmm": baddbmm,
        "_grouped_mm": aten_grouped_mm,
    }
)
