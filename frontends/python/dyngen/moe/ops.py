"""The grouped-experts primitives as torch.library ops (namespace `dyngen`):

    torch.ops.dyngen.expert_offsets(Tensor top_k_index, int num_experts) -> Tensor   i32 [E]
    torch.ops.dyngen.expert_order(Tensor top_k_index, int num_experts) -> Tensor     i32 [T*k]
    torch.ops.dyngen.grouped_mm(Tensor a, Tensor offs, Tensor[] weights, bool weights_nk=True)
    torch.ops.dyngen.grouped_mm_wgrad(Tensor g, Tensor x, Tensor offs) -> Tensor    [E, N, K]

Each has a fake with static output shapes (the only size is the routed-row count R, a multiple of
the token count), so Dynamo traces a whole MoE layer into one graph with no break and no
data-dependent size, and dyngen's importer maps each node one-to-one to the IR op of the same
name (fx/moe_ops.py). The eager bodies are executors/aten_grouped.py's: they read the offsets on
the host, which is allowed since they run only outside dyngen (eager PyTorch, tests).

grouped_mm has an autograd formula: da = grouped_mm(grad, offs, weights, not weights_nk), and a
weight that requires grad gets its slice of grouped_mm_wgrad (for "kn", the wgrad of (a, grad),
which is the transpose of the "nk" one). Base weights frozen under PEFT get nothing computed.
"""

from __future__ import annotations

import torch

from ..executors import aten_grouped

_INDEX_DTYPES = (torch.int32, torch.int64)


def _check_routing(top_k_index: torch.Tensor, num_experts: int) -> None:
    torch._check(top_k_index.dtype in _INDEX_DTYPES, lambda: "top_k_index must be i32 or i64")
    torch._check(num_experts > 0, lambda: f"num_experts must be positive, got {num_experts}")


@torch.library.custom_op("dyngen::expert_offsets", mutates_args=())
def expert_offsets(top_k_index: torch.Tensor, num_experts: int) -> torch.Tensor:
    return aten_grouped.expert_offsets(top_k_index, num_experts)


@expert_offsets.register_fake
def _(top_k_index, num_experts):
    _check_routing(top_k_index, num_experts)
    return top_k_index.new_empty(num_experts, dtype=torch.int32)


@torch.library.custom_op("dyngen::expert_order", mutates_args=())
def expert_order(top_k_index: torch.Tensor, num_experts: int) -> torch.Tensor:
    return aten_grouped.expert_order(top_k_index, num_experts)


@expert_order.register_fake
def _(top_k_index, num_experts):
    _check_routing(top_k_index, num_experts)
    return top_k_index.new_empty(top_k_index.numel(), dtype=torch.int32)


def _out_features(weights, weights_nk: bool):
    w = weights[0]
    return w.shape[-2] if weights_nk else w.shape[-1]


def _check_grouped_mm(a, offs, weights, weights_nk) -> None:
    experts = offs.shape[0]
    torch._check(a.dim() == 2 and a.dtype.is_floating_point, lambda: "a must be a float matrix")
    torch._check(offs.dtype == torch.int32 and offs.dim() == 1, lambda: "offs must be i32 [E]")
    fused = len(weights) == 1 and weights[0].dim() == 3
    torch._check(
        (fused and weights[0].shape[0] == experts)
        or (len(weights) == experts and all(w.dim() == 2 for w in weights)),
        lambda: f"weights: one [E, ., .] tensor or E = {experts} matrices",
    )
    k = a.shape[1]
    for w in weights:
        torch._check(w.dtype == a.dtype, lambda: f"weight dtype {w.dtype} is not a's {a.dtype}")
        torch._check(w.shape[-1 if weights_nk else -2] == k, lambda: "weights do not take K")
        torch._check(w.shape[-2:] == weights[0].shape[-2:], lambda: "weights differ in shape")


@torch.library.custom_op("dyngen::grouped_mm", mutates_args=())
def grouped_mm(
    a: torch.Tensor, offs: torch.Tensor, weights: list[torch.Tensor], weights_nk: bool = True
) -> torch.Tensor:
    return aten_grouped.grouped_mm(a, offs, weights, weights_nk)


@grouped_mm.register_fake
def _(a, offs, weights, weights_nk=True):
    _check_grouped_mm(a, offs, weights, weights_nk)
    return a.new_empty(a.shape[0], _out_features(weights, weights_nk))


@torch.library.custom_op("dyngen::grouped_mm_wgrad", mutates_args=())
def grouped_mm_wgrad(g: torch.Tensor, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return aten_grouped.grouped_mm_wgrad(g, x, offs)


@grouped_mm_wgrad.register_fake
def _(g, x, offs):
    torch._check(g.dim() == 2 and x.dim() == 2, lambda: "g and x must be matrices")
    torch._check(g.shape[0] == x.shape[0], lambda: "g and x must have the same rows")
    torch._check(g.dtype == x.dtype, lambda: "g and x must have one dtype")
    torch._check(offs.dtype == torch.int32 and offs.dim() == 1, lambda: "offs must be i32 [E]")
    return g.new_empty(offs.shape[0], g.shape[1], x.shape[1])


def _setup_grouped_mm(ctx, inputs, output):
    a, offs, weights, weights_nk = inputs
    ctx.weights_nk = weights_nk
    ctx.a_needs_grad = a.requires_grad
    ctx.w_needs_grad = [w.requires_grad for w in weights]
    ctx.fused = len(weights) == 1 and weights[0].dim() == 3
    # a is kept only when a weight gradient needs it (base weights are frozen under PEFT).
    keep_a = a if any(ctx.w_needs_grad) else None
    ctx.save_for_backward(offs, keep_a, *weights)


def _grouped_mm_backward(ctx, grad):
    offs, a, *weights = ctx.saved_tensors
    grad = grad.contiguous()
    da = None
    if ctx.a_needs_grad:
        da = torch.ops.dyngen.grouped_mm(grad, offs, weights, not ctx.weights_nk)
    dws = [None] * len(ctx.w_needs_grad)  # a list, as the weights are one
    if any(ctx.w_needs_grad):
        if ctx.weights_nk:  # out = a @ W^T: dW = grad^T @ a, [E, N, K]
            gw = torch.ops.dyngen.grouped_mm_wgrad(grad, a, offs)
        else:  # out = a @ W: dW = a^T @ grad, [E, K, N]
            gw = torch.ops.dyngen.grouped_mm_wgrad(a, grad, offs)
        if ctx.fused:
            dws = [gw]
        else:
            dws = [gw[e] if need else None for e, need in enumerate(ctx.w_needs_grad)]
    # The dispatcher leaves out an argument equal to its default (weights_nk=True), and the
    # gradients must match the arguments it passed.
    return (da, None, dws, None)[: len(ctx.needs_input_grad)]


grouped_mm.register_autograd(_grouped_mm_backward, setup_context=_setup_grouped_mm)
