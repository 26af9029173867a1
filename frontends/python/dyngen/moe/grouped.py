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
  combine  y scattered back to flat order t*k + j (index_copy: each row written once, no atomics),
           then the k rows of a token summed in f32 in slot order j = 0..k-1 and rounded once to D
Eager's loop instead adds each expert's rows into a D-typed zeros with index_add_, in expert-index
order, rounding to D after every add: a token's output differs from ours by at most the k - 1
roundings of eager's partial sums (ours is the exactly rounded f32 sum of the same D-rounded
terms), and ours does not depend on how the tokens were spread over experts. Each base GEMM sums
its K products in f32 in both, in whatever order the GEMM takes. In the backward, the gradient
of x sums a token's k rows (index_select's backward, an index_add) and each expert's LoRA A/B
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


def expert_linear(x: torch.Tensor, offs: torch.Tensor, lin: ExpertLinear) -> torch.Tensor:
    """Each routed row through its expert's linear (+ LoRA as PEFT computes it)."""
    result = torch.ops.dyngen.grouped_mm(x, offs, lin.weights, lin.nk)
    lora = lin.lora
    if lora is None:
        return result
    result_dtype = result.dtype
    xl = x.to(lora.a[0].dtype)  # PEFT's _cast_input_dtype
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
    x = hidden.index_select(0, routed_tokens(top_k_index, order))
    y = expert_linear(act(expert_linear(x, offs, gate)) * expert_linear(x, offs, up), offs, down)
    w = top_k_weights.reshape(t * k).index_select(0, order)
    y = (y * w.unsqueeze(1)).to(hidden.dtype)
    # ATen's index_copy takes an i64 index only.
    flat = torch.zeros(t * k, h, dtype=y.dtype, device=y.device).index_copy(0, order.long(), y)
    return flat.view(t, k, h).sum(1, dtype=torch.float32).to(hidden.dtype)
