"""One MoE layer's experts written with the grouped primitives (ops.py) and ordinary torch ops.

Every size is static given the token count T (R = T*k routed rows), so Dynamo traces the layer
into one graph with T as its only symbol, and no value is read back to the host.

Note [Grouped experts semantics]
grouped_experts(hidden [T, H], top_k_index [T, k], top_k_weights [T, k], gate, up, down, act)
computes, for the model's dtype D (bf16 in the seed) and LoRA factors in f32 as PEFT keeps them:
  route    offs = expert_offsets(top_k_index), order = expert_order(top_k_index) (stable by expert),
           the routed row p holds token order[p] // k (taken from an arange, no integer division)
  linear   base = grouped_mm(x, offs, W) in f32, rounded once to D; with LoRA, exactly PEFT's
           lora.Linear.forward: x cast to f32, dropout, A then B (f32 GEMMs), times scaling (f32),
           base + lora in f32, rounded once to D
  expert   down(act(gate(x)) * up(x)), act and product in D as the model computes them
  weight   y * top_k_weights[t, j] in D (the routing weights are D, as the three models make them)
  combine  y gathered back into flat order t*k + j by the inverse permutation of order (each row
           read once, no scatter, no atomics), then the k rows of a token summed in f32 in slot
           order j = 0..k-1 and rounded once to D
Eager's loop instead adds each expert's rows into a D-typed zeros with index_add_, in expert-index
order, rounding to D after every add: a token's output differs from ours by at most the k - 1
roundings of eager's partial sums (ours is the exactly rounded f32 sum of the same D-rounded
terms), and ours does not depend on how the tokens were spread over experts. Each base GEMM sums
its K products in f32 in both, in whatever order the GEMM takes. In the backward, the combine's
gradient is the token's gradient row for each of its k routed rows (a gather by token, written
as the combine's own formula: autograd would derive a scatter into zeros), the gradient of x
sums a token's k rows (index_select's backward, an index_add) and each expert's LoRA A/B
gradient is one grouped_mm_wgrad segment, accumulated in f32 in a fixed order; base weights get
no gradient (frozen under PEFT). Empty experts contribute nothing and get zero LoRA gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import ops  # noqa: F401  (registers torch.ops.dyngen.*)


@dataclass
class Lora:
    """PEFT's vanilla LoRA on one expert linear, for every expert: per-expert A [r, K] and B
    [N, r] (one dtype, f32 under PEFT), one scaling and one dropout module for all."""

    a: list[torch.Tensor]
    b: list[torch.Tensor]
    scaling: float
    dropout: Callable[[torch.Tensor], torch.Tensor] | None = None


@dataclass
class ExpertLinear:
    """One linear of every expert, without bias: E matrices ([N, K] when nk, else [K, N]) or one
    fused [E, N, K] / [E, K, N] parameter (the contract's G = 1 form), and optional LoRA."""

    weights: list[torch.Tensor]
    nk: bool = True
    lora: Lora | None = None


def expert_linear(
    x: torch.Tensor, offs: torch.Tensor, lin: ExpertLinear, x_cast: dict | None = None
) -> torch.Tensor:
    """Each routed row through its expert's linear (+ LoRA as PEFT computes it). `x_cast`: x in
    the LoRA factors' dtype by dtype, shared by the linears that read the same x (gate and up),
    so the graph holds one cast, and one saved activation, instead of one per linear."""
    result = torch.ops.dyngen.grouped_mm(x, offs, lin.weights, lin.nk)
    lora = lin.lora
    if lora is None:
        return result
    result_dtype = result.dtype
    x_cast = {} if x_cast is None else x_cast
    if lora.a[0].dtype not in x_cast:
        x_cast[lora.a[0].dtype] = x.to(lora.a[0].dtype)  # PEFT's _cast_input_dtype
    xl = x_cast[lora.a[0].dtype]
    if lora.dropout is not None:
        xl = lora.dropout(xl)
    h = torch.ops.dyngen.grouped_mm(xl, offs, lora.a, True)
    result = result + torch.ops.dyngen.grouped_mm(h, offs, lora.b, True) * lora.scaling
    return result.to(result_dtype)


def routed_tokens(top_k_index: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """The token of each routed row: order[p] // k, as a gather from 0, 0, .., 1, 1, .. (k each)."""
    t, k = top_k_index.shape
    token_of_slot = torch.arange(t, device=top_k_index.device).unsqueeze(1).expand(t, k)
    return token_of_slot.reshape(t * k).index_select(0, order)


def grouped_experts(
    hidden: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
    gate: ExpertLinear,
    up: ExpertLinear,
    down: ExpertLinear,
    act: Callable[[torch.Tensor], torch.Tensor],
    num_experts: int,
) -> torch.Tensor:
    """sum_j top_k_weights[t, j] * expert_{top_k_index[t, j]}(hidden[t]) for every token t
    ([T, H], hidden's dtype), with expert(x) = down(act(gate(x)) * up(x)):
    Note [Grouped experts semantics]."""
    t, h = hidden.shape
    k = top_k_index.shape[1]
    offs = torch.ops.dyngen.expert_offsets(top_k_index, num_experts)
    order = torch.ops.dyngen.expert_order(top_k_index, num_experts)
    tokens = routed_tokens(top_k_index, order)
    x = hidden.index_select(0, tokens)
    x_cast: dict = {}
    gated = act(expert_linear(x, offs, gate, x_cast)) * expert_linear(x, offs, up, x_cast)
    y = expert_linear(gated, offs, down)
    w = top_k_weights.reshape(t * k).index_select(0, order)
    y = (y * w.unsqueeze(1)).to(hidden.dtype)
    return _Combine.apply(y, inverse_order(order), tokens, k)


def inverse_order(order: torch.Tensor) -> torch.Tensor:
    """inv with inv[order[p]] = p: the routed row of each flat slot t*k + j."""
    rows = torch.arange(order.shape[0], dtype=order.dtype, device=order.device)
    # ATen's index_copy takes an i64 index only.
    return torch.zeros_like(order).index_copy(0, order.long(), rows)


class _Combine(torch.autograd.Function):
    """out[t] = sum over j of y[inv[t*k + j]] in f32, rounded once to y's dtype; the gradient
    of y's row p is the gradient of its token's row (Note [Grouped experts semantics])."""

    @staticmethod
    def forward(ctx, y, inv, tokens, k):
        ctx.save_for_backward(tokens)
        flat = y.index_select(0, inv)
        return flat.view(-1, k, y.shape[1]).sum(1, dtype=torch.float32).to(y.dtype)

    @staticmethod
    def backward(ctx, grad):
        (tokens,) = ctx.saved_tensors
        return grad.index_select(0, tokens), None, None, None
