"""PEFT's ParamWrapper (LoRA on a parameter: `target_parameters`) around transformers 5's fused
experts, computed with the LoRA factors fed to grouped_experts, undoably.

Note [PEFT ParamWrapper on fused experts]
PEFT 0.21 turns "all-linear" on OLMoE's fused experts into one ParamWrapper per targeted
parameter, nested: `experts` is ParamWrapper(down_proj) around ParamWrapper(gate_up_proj) around
OlmoeExperts. Its forward registers a torch parametrization on the experts module at every call
(W + scaling * B @ A folded with a bf16 baddbmm) and removes it after; each registration makes a
new class, so Dynamo recompiles the frames every call until its recompile limit and then runs
them uncompiled, under every backend. Under dyngen.thunderfx.compile the outer wrapper's forward
is swapped (on the instance, as Note [MoE block adapters] does) for run_fused_experts with the
LoRA factors as they are: per routed row x@W_e^T + scaling * (x@A_e^T)@B_e^T, the LoRA GEMMs
grouped_mm's in f32 on PEFT's f32 factors (expert_linear), so the dense delta is never formed and
nothing is parametrized.

The layout, read from ParamWrapper.update_layer / get_delta_factors and checked against PEFT's
get_delta_weight (tests/python/test_hf5_models.py): for a parameter with E experts and rank r,
with K the input and N the output features of each expert (in either order of the parameter),
    lora_A.weight [r*E, K]  -> A_e = rows e*r .. e*r + r - 1: view [E, r, K]       (rank per
    lora_B.weight [N, r*E]  -> B_e = columns j*E + e, j < r: view [N, r, E] permuted expert, no
                                 to [E, N, r] (strided; grouped_mm reads it)       sharing)
    delta_e = scaling * B_e @ A_e ([N, K]; transposed into an is_transposed parameter)
so both factors are in the "nk" form whatever the parameter's layout. gate_up_proj's B splits by
rows into the gate and up halves (hf5_experts.split_gate_up).

What keeps PEFT's route, with the reason in stats()["moe_blocks"] (and, if the state changes
after the route was chosen, a recorded fallback at the call, Note [No silent fallbacks]): merged
adapters, several active adapters, a LoRA variant (DoRA) or LoRA bias, a dropout module (PEFT
refuses dropout here), a parameter dtype PEFT upcasts (fp8), extra forward arguments
(adapter_names), and experts hf5_experts.why_not_grouped refuses. use_rslora changes only
`scaling`, which is read as PEFT computed it. Disabled adapters, or a wrapper with no active
adapter of its own, give that parameter no LoRA, as PEFT's forward does.

Note [PEFT ParamWrapper on other parameters]
PEFT 0.21 also wraps OLMoE's router (`gate.weight`, a 2-D parameter) in a ParamWrapper, whose
per-forward parametrization storms Dynamo the same way. A chain of wrappers on 2-D parameters of
any other module has its outermost forward swapped for torch.func.functional_call of the wrapped
module with each parameter replaced by W + get_delta_weight(adapter): PEFT's own delta, in the
parameter's dtype, added as its _LoraParameterProxy adds it, so the value is PEFT's; Dynamo traces
functional_call into the graph, with no new class per call. The same states keep PEFT's route.
"""

from __future__ import annotations

import types

import torch
from torch import nn

from ..counters import note_moe_block, record_fallback
from .grouped import Lora
from .hf5_experts import is_fused_experts, run_fused_experts, why_not_grouped

_PARAMETERS = ("gate_up_proj", "down_proj")
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def is_param_wrapper(module) -> bool:
    return type(module).__name__ == "ParamWrapper" and type(module).__module__.startswith("peft.")


def wrapper_chain(module) -> tuple[dict, nn.Module]:
    """({parameter name: its ParamWrapper}, the module they wrap) of nested ParamWrappers."""
    wrappers = {}
    while is_param_wrapper(module):
        wrappers.setdefault(module.parameter_name, []).append(module)
        module = module.base_layer
    return wrappers, module


def _active_adapter(w) -> tuple[str | None, str]:
    """(the one adapter PEFT's forward applies, "") or (None, "") when it applies none, or
    (None, why) when it is not computed here."""
    if getattr(w, "merged", False):
        return None, "LoRA adapters merged into the parameters"
    if getattr(w, "disable_adapters", False):
        return None, ""
    active = [a for a in w.active_adapters if a in w.lora_A]
    if len(active) > 1:
        return None, f"{len(active)} active LoRA adapters"
    if not active:
        return None, ""
    name = active[0]
    if name in getattr(w, "lora_variant", {}) or w.use_dora.get(name, False):
        return None, "a LoRA variant (DoRA)"
    if w.lora_B[name].bias is not None:
        return None, "LoRA with a bias"
    if not isinstance(w.lora_dropout[name], nn.Identity):
        return None, "LoRA dropout on a parameter"
    if w.get_param().dtype not in _DTYPES:
        return None, f"a {w.get_param().dtype} parameter (PEFT upcasts it)"
    return name, ""


def lora_factors(w) -> Lora | None | str:
    """The active adapter of ParamWrapper `w` on a 3-D parameter as a Lora in the "nk" form,
    None when PEFT's forward applies no LoRA, or the reason it cannot be computed here."""
    name, why = _active_adapter(w)
    if name is None:
        return why or None
    param = w.get_param()
    experts, rank = w.num_experts, w.r[name]
    a, b = w.lora_A[name].weight, w.lora_B[name].weight
    if param.dim() != 3 or param.shape[0] != experts or a.dtype != b.dtype:
        return "LoRA factors that are not one rank-r pair per expert"
    a3 = a.view(experts, rank, a.shape[-1])
    b3 = b.view(b.shape[0], rank, experts).permute(2, 0, 1)
    return Lora([a3], [b3], w.scaling[name])


def folded_parameters(chain: dict) -> dict | str:
    """Note [PEFT ParamWrapper on other parameters]: {parameter: W + delta} of a chain of 2-D
    parameters, as PEFT's parametrization computes them, or the reason it is not done here."""
    folded = {}
    for parameter, wrappers in chain.items():
        w = wrappers[0]
        if len(wrappers) != 1 or w.num_experts != 1 or w.get_param().dim() != 2:
            return f"LoRA on {parameter}: not one wrapper of a 2-D parameter"
        name, why = _active_adapter(w)
        if why:
            return why
        if name is not None:  # _LoraParameterProxy.forward, delta in the parameter's dtype
            folded[parameter] = w.get_param() + w.get_delta_weight(name)
    return folded


def wrapped_experts_state(wrapper) -> tuple[nn.Module, dict] | str:
    """(the experts module, {parameter: Lora or None}) of a ParamWrapper chain, or why not."""
    chain, experts = wrapper_chain(wrapper)
    if not is_fused_experts(experts):
        return f"a ParamWrapper around {type(experts).__name__}, not transformers 5's experts"
    why = why_not_grouped(experts)
    if why:
        return why
    loras = {}
    for parameter, wrappers in chain.items():
        if parameter not in _PARAMETERS or len(wrappers) != 1:
            return f"LoRA on {parameter} ({len(wrappers)} wrappers)"
        lora = lora_factors(wrappers[0])
        if isinstance(lora, str):
            return lora
        loras[parameter] = lora
    return experts, loras


@torch._dynamo.disable
def _record(wrapper, reason: str) -> None:
    record_fallback(wrapper._dyngen_wrapper_name, reason, what="runs PEFT's ParamWrapper")


def _wrapped_experts_forward(self, hidden_states, top_k_index, top_k_weights, *args, **kwargs):
    state = wrapped_experts_state(self)
    if args or kwargs:
        state = "extra forward arguments (adapter_names)"
    if isinstance(state, str):
        _record(self, state)
        return type(self).forward(self, hidden_states, top_k_index, top_k_weights, *args, **kwargs)
    experts, loras = state
    return run_fused_experts(
        experts,
        hidden_states,
        top_k_index,
        top_k_weights,
        gate_up_lora=loras.get("gate_up_proj"),
        down_lora=loras.get("down_proj"),
    )


def _folded_forward(self, x, *args, **kwargs):
    chain, base = wrapper_chain(self)
    folded = folded_parameters(chain)
    if "adapter_names" in kwargs:
        folded = "extra forward arguments (adapter_names)"
    if isinstance(folded, str):
        _record(self, folded)
        return type(self).forward(self, x, *args, **kwargs)
    return torch.func.functional_call(base, folded, (x, *args), kwargs)


def _route_of(wrapper) -> tuple[str, object, str]:
    """(the class noted, the forward that replaces the wrapper's, why not) of a ParamWrapper
    chain's outermost wrapper."""
    chain, base = wrapper_chain(wrapper)
    cls = f"ParamWrapper({type(base).__name__})"
    if is_fused_experts(base):
        state = wrapped_experts_state(wrapper)
        return cls, _wrapped_experts_forward, state if isinstance(state, str) else ""
    folded = folded_parameters(chain)
    return cls, _folded_forward, folded if isinstance(folded, str) else ""


class ParamWrapperRoute:
    """The outermost ParamWrapper of each chain in `model`, its forward swapped (when `enabled`
    and the state allows it) for _wrapped_experts_forward around fused experts, else
    _folded_forward; `undo()` restores them. The experts are noted in stats()["moe_blocks"]
    with their route; another wrapper only when it keeps PEFT's route, with the reason."""

    def __init__(self, model: nn.Module, enabled: bool = True):
        self.grouped: dict[str, nn.Module] = {}  # experts
        self.folded: dict[str, nn.Module] = {}  # the others
        self.not_grouped: dict[str, str] = {}
        inner = set()
        for name, mod in model.named_modules():
            if not is_param_wrapper(mod) or id(mod) in inner:
                continue
            chain, base = wrapper_chain(mod)
            inner.update(id(w) for ws in chain.values() for w in ws)
            cls, forward, why = _route_of(mod)
            why = why if enabled else "moe='loop' asked"
            name = name or "<model>"
            if why:
                _restore(mod)
                self.not_grouped[name] = why
            else:
                _swap(mod, name, forward)
                experts = forward is _wrapped_experts_forward
                (self.grouped if experts else self.folded)[name] = mod
            if why or forward is _wrapped_experts_forward:
                note_moe_block(name, cls, why)

    def undo(self) -> None:
        for mod in self.folded.values():
            _restore(mod)
        for name, mod in self.grouped.items():
            if _restore(mod):
                note_moe_block(
                    name, f"ParamWrapper({type(mod.get_base_layer()).__name__})", "undone"
                )
        self.grouped, self.folded = {}, {}


def _swap(mod: nn.Module, name: str, forward) -> None:
    if "_dyngen_wrapper_name" in mod.__dict__:
        return
    mod._dyngen_wrapper_original = mod.__dict__.get("forward")
    mod._dyngen_wrapper_name = name
    mod.forward = types.MethodType(forward, mod)


def _restore(mod: nn.Module) -> bool:
    if "_dyngen_wrapper_name" not in mod.__dict__:
        return False
    original = mod.__dict__.pop("_dyngen_wrapper_original")
    del mod._dyngen_wrapper_name
    if original is None:
        del mod.forward
    else:
        mod.forward = original
    return True
