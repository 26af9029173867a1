"""The known MoE blocks of transformers 4.57, switched to grouped experts (grouped.py), undoably.

Note [MoE block adapters]
Each adapter swaps the `forward` of one module instance (never transformers' classes): OLMoE's
OlmoeSparseMoeBlock and PhiMoE's PhimoeSparseMoeBlock (GRIN-MoE is built as PhiMoE) keep their
router lines (OLMoE's are inline in the block's forward and are copied as written; PhiMoE's input
jitter and `sparsemixer` are the model's, called as they are), and DBRX's DbrxExperts (inside
DbrxFFN, whose DbrxRouter stays untouched) replaces only its expert loop. The expert linears are
read at every call (FSDP2 gives parameters new storage each step): plain nn.Linear without bias,
or PEFT's lora.Linear with one active vanilla adapter (not merged, no DoRA, no LoRA bias, the same
scaling, rank and dropout on every expert); DBRX's fused w1/v1/w2 are passed whole, viewed
[E, F, H] (w2 in the "kn" layout). A block whose experts are anything else keeps the model's own
loop, and so does a recognized block whose PEFT state changes later to one of those (a recorded
fallback, Note [No silent fallbacks]). Any other module holding an `experts` ModuleList is
reported as not grouped, with the reason.
"""

from __future__ import annotations

import inspect
import sys
import types

import torch
import torch.nn.functional as F
from torch import nn

from ..counters import note_moe_block, record_fallback
from .grouped import ExpertLinear, Lora, grouped_experts
from .peft_param_wrapper import ParamWrapperRoute

# (gate, up, down) of each expert: OlmoeMLP and PhimoeBlockSparseTop2MLP.
OLMOE_LINEARS = ("gate_proj", "up_proj", "down_proj")
PHIMOE_LINEARS = ("w1", "w3", "w2")


def _lora_state(m) -> tuple[str | None, str]:
    """(the active adapter of a PEFT lora.Linear grouped_experts can compute, "") or (None, why)."""
    if getattr(m, "merged", False) or getattr(m, "disable_adapters", False):
        return None, "LoRA adapters merged or disabled"
    active = [a for a in m.active_adapters if a in m.lora_A]
    if len(active) != 1:
        return None, f"{len(active)} active LoRA adapters"
    name = active[0]
    if name in getattr(m, "lora_variant", {}) or getattr(m, "fan_in_fan_out", False):
        return None, "a LoRA variant (DoRA) or fan_in_fan_out"
    if m.lora_B[name].bias is not None or m.lora_A[name].bias is not None:
        return None, "LoRA with a bias"
    if not getattr(m, "cast_input_dtype_enabled", True):
        return None, "LoRA input dtype casting disabled"
    return name, ""


def expert_linear_of(modules) -> ExpertLinear | str:
    """One linear of every expert as an ExpertLinear, or the reason it cannot be grouped."""
    lins = list(modules)
    peft = [hasattr(m, "base_layer") and hasattr(m, "lora_A") for m in lins]
    if any(peft) and not all(peft):
        return "LoRA on some experts only"
    bases = [m.base_layer if p else m for m, p in zip(lins, peft)]
    if any(type(b) is not nn.Linear or b.bias is not None for b in bases):
        return "an expert linear that is not nn.Linear without bias"
    weights = [b.weight for b in bases]
    if not all(peft):
        return ExpertLinear(weights)
    states = [_lora_state(m) for m in lins]
    bad = next((why for name, why in states if name is None), None)
    if bad:
        return bad
    a = [m.lora_A[n].weight for m, (n, _) in zip(lins, states)]
    b = [m.lora_B[n].weight for m, (n, _) in zip(lins, states)]
    scalings = {m.scaling[n] for m, (n, _) in zip(lins, states)}
    drops = [m.lora_dropout[n] for m, (n, _) in zip(lins, states)]
    if len(scalings) != 1 or len({w.shape for w in a}) != 1 or len({w.dtype for w in a}) != 1:
        return "LoRA scaling, rank or dtype differ between experts"
    if {type(d) for d in drops} - {nn.Identity, nn.Dropout}:
        return "a LoRA dropout that is not nn.Dropout"
    if len({getattr(d, "p", 0.0) for d in drops}) != 1:
        return "LoRA dropout differs between experts"
    dropout = None if isinstance(drops[0], nn.Identity) else drops[0]
    return ExpertLinear(weights, lora=Lora(a, b, scalings.pop(), dropout))


def _swiglu_experts(block, names: tuple[str, str, str]):
    """(gate, up, down, act) of a ModuleList of gated-MLP experts, or the reason they cannot be
    grouped."""
    if not isinstance(getattr(block, "experts", None), nn.ModuleList):
        # transformers 5 fuses a layer's experts into 3-D parameters under the same class name
        return "experts are not a ModuleList of expert MLPs (transformers 5's fused experts)"
    experts = list(block.experts)
    acts = {type(e.act_fn) for e in experts}
    if len(acts) != 1:
        return "experts with different activations"
    lins = [expert_linear_of(getattr(e, n) for e in experts) for n in names]
    bad = next((x for x in lins if isinstance(x, str)), None)
    return bad or (*lins, experts[0].act_fn)


def _olmoe_forward(self, hidden_states):
    parts = _swiglu_experts(self, OLMOE_LINEARS)
    if isinstance(parts, str):
        return _fall_back(self, parts, hidden_states)
    batch_size, sequence_length, hidden_dim = hidden_states.shape
    hidden_states = hidden_states.view(-1, hidden_dim)
    # The router, as OlmoeSparseMoeBlock.forward writes it.
    router_logits = self.gate(hidden_states)
    routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
    routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
    if self.norm_topk_prob:
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
    routing_weights = routing_weights.to(hidden_states.dtype)
    out = grouped_experts(
        hidden_states, selected_experts, routing_weights, *parts, num_experts=self.num_experts
    )
    return out.reshape(batch_size, sequence_length, hidden_dim), router_logits


def _phimoe_forward(self, hidden_states):
    parts = _swiglu_experts(self, PHIMOE_LINEARS)
    if isinstance(parts, str):
        return _fall_back(self, parts, hidden_states)
    batch_size, sequence_length, hidden_dim = hidden_states.shape
    if self.training and self.input_jitter_noise > 0:
        hidden_states *= torch.empty_like(hidden_states).uniform_(
            1.0 - self.input_jitter_noise, 1.0 + self.input_jitter_noise
        )
    hidden_states = hidden_states.view(-1, hidden_dim)
    router_logits = self.gate(hidden_states)
    # modeling_phimoe, held by the instance (Dynamo cannot trace transformers' lazy imports);
    # sparsemixer is read at each call, so a patched one (bench/moe_peft's shims) is used.
    routing_weights, selected_experts = self._dyngen_model_module.sparsemixer(
        router_logits, jitter_eps=self.router_jitter_noise, training=self.training
    )
    out = grouped_experts(
        hidden_states, selected_experts, routing_weights, *parts, num_experts=self.num_experts
    )
    return out.reshape(batch_size, sequence_length, hidden_dim), router_logits


def _dbrx_check(self):
    """_dbrx_parts, after the check that the block is transformers 4.57's DbrxExperts (once, when
    the route is chosen: the adapter's forward replaces that signature)."""
    params = list(inspect.signature(type(self).forward).parameters)
    if params != ["self", "x", "weights", "top_weights", "top_experts"]:
        return f"DbrxExperts.forward{tuple(params[1:])} is not transformers 4.57's"
    return _dbrx_parts(self)


def _dbrx_parts(self):
    mlp = getattr(self, "mlp", None)
    if type(mlp).__name__ != "DbrxExpertGLU":
        return f"DbrxExperts.mlp is {type(mlp).__name__}"
    if not all(isinstance(getattr(mlp, n, None), nn.Parameter) for n in ("w1", "v1", "w2")):
        return "DbrxExpertGLU's w1/v1/w2 are not plain parameters"
    shape = (mlp.moe_num_experts, mlp.ffn_hidden_size, mlp.hidden_size)
    w1, v1, w2 = (getattr(mlp, n).view(shape) for n in ("w1", "v1", "w2"))
    # down = h @ w2_e with w2_e [ffn, hidden]: the "kn" layout.
    return ExpertLinear([w1]), ExpertLinear([v1]), ExpertLinear([w2], nk=False), mlp.activation_fn


def _dbrx_experts_forward(self, x, weights, top_weights, top_experts):
    parts = _dbrx_parts(self)
    if isinstance(parts, str):
        return _fall_back(self, parts, x, weights, top_weights, top_experts)
    bsz, q_len, hidden_size = x.shape
    out = grouped_experts(
        x.view(-1, hidden_size), top_experts, top_weights, *parts, self.moe_num_experts
    )
    return out.reshape(bsz, q_len, hidden_size)


@torch._dynamo.disable
def _record_loop(block, reason):
    record_fallback(block._dyngen_moe_name, reason, what="runs its expert loop")


def _fall_back(block, reason, *args):
    """Note [MoE block adapters]: the block's own forward, the fallback recorded."""
    _record_loop(block, reason)
    return type(block).forward(block, *args)


# Class name -> (the forward that replaces the instance's, what checks it can be grouped).
ADAPTERS = {
    "OlmoeSparseMoeBlock": (_olmoe_forward, lambda b: _swiglu_experts(b, OLMOE_LINEARS)),
    "PhimoeSparseMoeBlock": (_phimoe_forward, lambda b: _swiglu_experts(b, PHIMOE_LINEARS)),
    "DbrxExperts": (_dbrx_experts_forward, _dbrx_check),
}


class GroupedRoute:
    """The MoE blocks of one model switched to grouped experts; `undo()` restores them."""

    def __init__(self, model: nn.Module, enabled: bool = True):
        # transformers 5's fused experts under PEFT: Note [PEFT ParamWrapper on fused experts]
        self.param_wrappers = ParamWrapperRoute(model, enabled)
        self.grouped: dict[str, nn.Module] = dict(self.param_wrappers.grouped)
        self.not_grouped: dict[str, str] = dict(self.param_wrappers.not_grouped)
        for name, mod in model.named_modules():
            cls = type(mod).__name__
            if cls in ADAPTERS:
                why = "moe='loop' asked" if not enabled else _why_not(mod)
            elif isinstance(getattr(mod, "experts", None), nn.ModuleList):
                why = f"no grouped-experts adapter for {cls}"
            else:
                continue
            name = name or "<model>"
            if why:
                _restore(mod)  # switched by an earlier compile: "loop" means the model's loop
                self.not_grouped[name] = why
            else:
                _swap(mod, name, ADAPTERS[cls][0])
                self.grouped[name] = mod
            note_moe_block(name, cls, why)

    def undo(self) -> None:
        self.param_wrappers.undo()
        for name, mod in self.grouped.items():
            if _restore(mod):
                note_moe_block(name, type(mod).__name__, "undone")
        self.grouped = {}


def _why_not(mod) -> str:
    parts = ADAPTERS[type(mod).__name__][1](mod)
    return parts if isinstance(parts, str) else ""


def _swap(mod: nn.Module, name: str, forward) -> None:
    """The instance's forward replaced (kept when an earlier compile replaced it already)."""
    if "_dyngen_moe_original" in mod.__dict__:
        return
    mod._dyngen_moe_original = mod.__dict__.get("forward")
    mod._dyngen_moe_name = name
    mod._dyngen_model_module = sys.modules[type(mod).__module__]
    mod.forward = types.MethodType(forward, mod)


def _restore(mod: nn.Module) -> bool:
    """The forward _swap replaced put back; False when there was none."""
    if "_dyngen_moe_original" not in mod.__dict__:
        return False
    original = mod.__dict__.pop("_dyngen_moe_original")
    del mod._dyngen_moe_name, mod._dyngen_model_module
    if original is None:
        del mod.forward
    else:
        mod.forward = original
    return True
