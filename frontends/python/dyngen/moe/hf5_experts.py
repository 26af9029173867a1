"""transformers 5's fused experts computed with grouped_experts (grouped.py), registered as the
experts implementation "dyngen" of transformers' ExpertsInterface.

Note [transformers 5 fused experts]
transformers 5 holds a MoE layer's experts in one `@use_experts_implementation` module with two
3-D parameters, gate_up_proj [E, 2I, H] and down_proj [E, H, I] ([E, H, 2I] and [E, I, H] when
the class sets is_transposed), and its forward(hidden [T, H], top_k_index [T, k], top_k_weights
[T, k]) dispatches to ALL_EXPERTS_FUNCTIONS[config._experts_implementation]. Importing dyngen.moe
on transformers 5 registers "dyngen" there with transformers' public `ExpertsInterface.register`
(nothing is registered on transformers 4), so a user writes

    model = AutoModelForCausalLM.from_config(cfg, experts_implementation="dyngen")
    # or from_pretrained(..., experts_implementation="dyngen"), model.set_experts_implementation
    # ("dyngen"), or the config's experts_implementation="dyngen"

and every experts module of the model runs grouped_experts, eagerly (through the primitives' ATen
bodies) or under any torch.compile backend (dyngen's importer maps the primitives one-to-one).
The model's semantics are kept: the default `_apply_gate` chunks the fused projection in two
halves and computes act(gate) * up, so gate and up are ExpertLinears over the two halves of
gate_up_proj (views, no copy; grouped_mm takes a strided fused weight), act is the module's
act_fn, and the routing weights multiply each expert's output as transformers' grouped_mm
implementation does. A module with anything else (a custom or interleaved `_apply_gate`, no gate,
biases, a post-expert norm, expert parallelism) is not grouped: the "dyngen" implementation runs
transformers' "grouped_mm" one instead, a recorded fallback (Note [No silent fallbacks]).
LoRA on these parameters is PEFT's ParamWrapper: Note [PEFT ParamWrapper on fused experts].
"""

from __future__ import annotations

import importlib.metadata

import torch

from ..counters import record_fallback
from .grouped import ExpertLinear, Lora, grouped_experts

IMPLEMENTATION = "dyngen"


def transformers_major() -> int:
    """transformers' major version, read without importing it (0 when it is not installed)."""
    try:
        return int(importlib.metadata.version("transformers").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 0


def is_fused_experts(module) -> bool:
    """A transformers 5 experts module of `@use_experts_implementation` (the decorator sets
    has_gate and is_transposed on the instance) holding 3-D expert parameters."""
    return (
        hasattr(module, "has_gate")
        and hasattr(module, "is_transposed")
        and isinstance(getattr(module, "down_proj", None), torch.Tensor)
        and module.down_proj.dim() == 3
    )


def _default_gate(module) -> bool:
    from transformers.integrations.moe import _default_apply_gate

    return getattr(type(module), "_apply_gate", None) is _default_apply_gate


def why_not_grouped(module) -> str:
    """The empty string when fused_experts_parts computes `module` exactly, else the reason."""
    if not getattr(module, "has_gate", False):
        return "experts without a gate projection (up_proj only)"
    for flag, why in (
        ("has_bias", "experts with biases"),
        ("has_post_expert_norm", "a post-expert norm"),
        ("_is_expert_parallel", "expert parallelism"),
    ):
        if getattr(module, flag, False):
            return why
    if not getattr(module, "is_concatenated", True) or not _default_gate(module):
        return "a gate other than transformers' default (act(gate) * up over two halves)"
    w13, w2 = module.gate_up_proj, module.down_proj
    if w13.dim() != 3 or w2.dim() != 3:
        return "expert parameters that are not 3-D"
    inter = w2.shape[1] if module.is_transposed else w2.shape[2]
    if w13.shape[2 if module.is_transposed else 1] != 2 * inter:
        return f"gate_up_proj {tuple(w13.shape)} does not hold two halves of {inter}"
    return ""


def split_gate_up(lora: Lora | None, inter: int) -> tuple[Lora | None, Lora | None]:
    """LoRA on gate_up_proj as LoRA on each half: A is shared, B's rows split like the weight's
    (the factors in the "nk" form of Note [PEFT ParamWrapper on fused experts])."""
    if lora is None:
        return None, None
    (b,) = lora.b
    gate = Lora(lora.a, [b[:, :inter]], lora.scaling, lora.dropout)
    up = Lora(lora.a, [b[:, inter:]], lora.scaling, lora.dropout)
    return gate, up


def fused_experts_parts(module, gate_up_lora: Lora | None = None, down_lora: Lora | None = None):
    """(gate, up, down, act) of a fused experts module that why_not_grouped accepts: the
    parameters read at every call (FSDP2 gives them new storage each step), LoRA as given."""
    nk = not module.is_transposed
    w13, w2 = module.gate_up_proj, module.down_proj
    inter = w2.shape[2] if nk else w2.shape[1]
    halves = (w13[:, :inter], w13[:, inter:]) if nk else (w13[:, :, :inter], w13[:, :, inter:])
    gate_lora, up_lora = split_gate_up(gate_up_lora, inter)
    return (
        ExpertLinear([halves[0]], nk, gate_lora),
        ExpertLinear([halves[1]], nk, up_lora),
        ExpertLinear([w2], nk, down_lora),
        module.act_fn,
    )


def run_fused_experts(
    module, hidden_states, top_k_index, top_k_weights, gate_up_lora=None, down_lora=None
) -> torch.Tensor:
    """The experts' output [T, H] in hidden's dtype: Note [Grouped experts semantics]."""
    parts = fused_experts_parts(module, gate_up_lora, down_lora)
    return grouped_experts(
        hidden_states, top_k_index, top_k_weights, *parts, num_experts=module.num_experts
    )


@torch._dynamo.disable
def _record(module, reason: str) -> None:
    record_fallback(
        type(module).__name__, reason, what="runs transformers' grouped_mm experts implementation"
    )


def dyngen_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """The "dyngen" entry of transformers' ExpertsInterface (called with the experts module)."""
    why = why_not_grouped(self)
    if why:
        from transformers.integrations.moe import grouped_mm_experts_forward

        _record(self, why)
        return grouped_mm_experts_forward(self, hidden_states, top_k_index, top_k_weights)
    return run_fused_experts(self, hidden_states, top_k_index, top_k_weights)


def register_experts_implementation() -> bool:
    """Registers "dyngen" in transformers' ExpertsInterface; False (nothing done) below
    transformers 5."""
    if transformers_major() < 5:
        return False
    from transformers.integrations.moe import ExpertsInterface

    ExpertsInterface.register(IMPLEMENTATION, dyngen_experts_forward)
    return True
