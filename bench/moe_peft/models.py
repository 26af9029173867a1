"""The four MoE models of the seed, built from their published config values with random weights,
with PEFT LoRA on every linear layer except lm_head (only the adapters train).

Note [Scales]
`full` passes moe_configs.json's "config" values unchanged (only the layer count can be lowered,
by --fixed-num-hidden-layers, as in the seed's commands). `tiny` applies the entry's "tiny"
overrides on top: hidden/ffn/heads/vocab/layers shrink, while the number of experts, top-k, the
routing function (OLMoE softmax top-8 without renormalisation, PhiMoE sparsemixer top-2, DBRX
softmax top-4 with normalisation), the attention variant (QK-norm, clip_qkv, GQA ratios, biases,
sliding window, RoPE kind) and the LoRA placement stay those of the real model, so Dynamo sees the
same graph structure (the expert loop, its graph breaks, the per-expert subgraph with a token
count s) at a size where a CPU step takes well under a second.

Note [Phi-3.5-MoE RoPE]
Phi-3.5-MoE uses "longrope" with 64-entry short/long factor lists that are checkpoint data. We
build longrope with every factor 1.0 (length head_dim / 2) and short/long mscale from longrope's
formula sqrt(1 + ln(max_pos / original_max_pos) / ln(original_max_pos)): the same code path and
cost, other numbers. GRIN-MoE uses plain
RoPE (rope_scaling null), as published.

Note [DBRX naming]
transformers 4.57's DbrxExperts views w1/v1/w2 as [experts, ffn_hidden_size, d_model]: hidden is
d_model and ffn is ffn_config.ffn_hidden_size (no swap in this release). Its experts are fused
parameters, not nn.Linear, so LoRA's "all-linear" reaches Wqkv, out_proj and the router only; the
expert subgraph is a plain SwiGLU MLP over slices of w1/v1/w2.

Note [PhiMoE rotary seq_len]
transformers 4.57's PhimoeModel calls `self.rotary_emb(hidden_states, seq_len=cache_position[-1]
+ 1)`: a 0-d tensor, so Dynamo's graph holds `torch.arange(<tensor>)`, whose length is an unbacked
symbol that no placeholder defines. ThunderFX's splitter (torch.fx split_module) then fails at the
first step with `KeyError: s<N>`, for stock ThunderFX and for every backend that hands that static
graph to Thunder (dyngen.thunderfx included). With no KV cache (training), cache_position is
arange(seq_length), so cache_position[-1] + 1 == hidden_states.shape[1]; the shim passes that int
instead. It is applied to every backend alike (eager included), recorded in the JSON, and switched
off with --no-model-shims to reproduce the failure.

Note [PhiMoE MultiplierProcessor]
PhiMoE's router (sparsemixer) calls MultiplierProcessor, a torch.autograd.Function whose forward
returns `multiplier * mask_for_one` ([tokens, 1]) and whose backward sends a Heun-style estimate to
`scores` (and nothing to the other inputs). Under ThunderFX (thunder 0.2.7.dev20260201, torch 2.11)
an autograd.Function traced by Dynamo returns a tensor of the wrong shape when its output is not
computed from its first input: [1] instead of [tokens, 1] (a 10-line repro: forward(ctx, x, m):
return m * 2). The MoE block then fails with "IndexError: too many indices for tensor of dimension
1", under stock ThunderFX and dyngen.thunderfx alike. The shim computes the same value and the same
gradients with plain ops (a straight-through term): with m = multiplier, g = masked_gates and e =
selected_experts held constant,
    out = m * mask_for_one + (h - h.detach()),
    h = m * (scores.gather(-1, e) - sum(g * scores, -1))
so d out / d scores = m * (onehot(e) - g) * grad, exactly the Function's backward, and the value is
unchanged (h - h.detach() == 0). It is applied for every backend alike; --no-model-shims restores
the original.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from pathlib import Path

import hf5_shims  # beside this file (every user puts bench/moe_peft on sys.path)
import torch
from class_swap import restore_class, swap_class

CONFIGS_PATH = Path(__file__).resolve().parent / "moe_configs.json"
MODELS: dict = {
    k: v for k, v in json.loads(CONFIGS_PATH.read_text()).items() if not k.startswith("_")
}
MODEL_NAMES = list(MODELS)

LORA_R, LORA_ALPHA = 16, 32


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def config_values(name: str, scale: str = "full", num_layers: int | None = None) -> dict:
    """The config keys for `name` at `scale` (Note [Scales]), layers overridden if asked."""
    entry = MODELS[name]
    values = copy.deepcopy(entry["config"])
    if scale == "tiny":
        values = _merge(values, entry["tiny"])
    elif scale != "full":
        raise ValueError(f"unknown scale {scale!r}")
    if num_layers is not None:
        values["n_layers" if values["model_type"] == "dbrx" else "num_hidden_layers"] = num_layers
    if values["model_type"] == "phimoe":
        rs = values.get("rope_scaling")
        if isinstance(rs, str):  # Note [Phi-3.5-MoE RoPE]: the JSON describes it in words
            half = values["hidden_size"] // values["num_attention_heads"] // 2
            orig = values["original_max_position_embeddings"]
            mscale = math.sqrt(
                1 + math.log(values["max_position_embeddings"] / orig) / math.log(orig)
            )
            values["rope_scaling"] = {
                "rope_type": "longrope",
                "short_factor": [1.0] * half,
                "long_factor": [1.0] * half,
                "short_mscale": mscale,
                "long_mscale": mscale,
                "original_max_position_embeddings": orig,
            }
    return values


def make_config(
    name: str, scale: str = "full", num_layers: int | None = None, attn_implementation: str = "sdpa"
):
    """A transformers config with every key passed explicitly (class defaults differ)."""
    from transformers import DbrxConfig, OlmoeConfig, PhimoeConfig

    values = config_values(name, scale, num_layers)
    model_type = values.pop("model_type")
    dtype = values.pop("torch_dtype", None)
    cls = {"olmoe": OlmoeConfig, "phimoe": PhimoeConfig, "dbrx": DbrxConfig}[model_type]
    cfg = cls(**values, use_cache=False)
    cfg._attn_implementation = attn_implementation
    cfg.benchmark_published_dtype = dtype
    return cfg


@dataclass
class Built:
    model: torch.nn.Module  # the PEFT model
    config: object
    trainable: int
    total: int
    lora_modules: list[str]  # distinct module names LoRA wrapped (suffixes)
    vocab_size: int
    shims: list[str]  # Note [PhiMoE rotary seq_len]


def build(
    name: str,
    *,
    scale: str = "full",
    num_layers: int | None = None,
    attn_implementation: str = "sdpa",
    dtype: torch.dtype = torch.bfloat16,
    device: str | torch.device = "cpu",
    seed: int = 0,
    shims: bool = True,
) -> Built:
    """Random-weight model + LoRA (r=16, alpha=32, all linear layers but lm_head)."""
    import transformers
    from peft import LoraConfig, get_peft_model
    from transformers import DbrxForCausalLM, OlmoeForCausalLM, PhimoeForCausalLM

    transformers.logging.set_verbosity_error()  # rope_scaling key notes for the synthetic longrope
    cfg = make_config(name, scale, num_layers, attn_implementation)
    cls = {"olmoe": OlmoeForCausalLM, "phimoe": PhimoeForCausalLM, "dbrx": DbrxForCausalLM}[
        cfg.model_type
    ]
    torch.manual_seed(seed)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # weights are created in dtype (no fp32 copy at full scale)
    try:
        with torch.device(device):
            model = cls(cfg)
    finally:
        torch.set_default_dtype(old)
    model.config.use_cache = False
    shim_notes = apply_shims(model) if shims else remove_shims()
    # transformers 5: PEFT's all-linear also reaches the fused experts (target_parameters);
    # PhiMoE's router must be excluded (Note [transformers 5 PhiMoE router and all-linear]).
    exclude = hf5_shims.lora_exclude(model) if hf5_shims.generation() >= 5 else None
    lora = LoraConfig(
        r=LORA_R,
        lora_alpha=LORA_ALPHA,
        lora_dropout=0.0,
        target_modules="all-linear",
        bias="none",
        **({"exclude_modules": exclude} if exclude else {}),
    )
    model = get_peft_model(model, lora)  # adapters in fp32 (autocast_adapter_dtype), as the seed
    model.train()
    # LoRA B starts at zero; give it small random values so that adapter gradients and the
    # adapters' share of the output are exercised from the first step (same for every backend).
    g = torch.Generator(device="cpu").manual_seed(seed + 1)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_((torch.randn(p.shape, generator=g) * 0.02).to(p.dtype))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    wrapped = sorted(
        {
            _lora_target_name(n, m)
            for n, m in model.named_modules()
            if hasattr(m, "lora_A") and hasattr(m, "base_layer")
        }
    )
    return Built(model, cfg, trainable, total, wrapped, cfg.vocab_size, shim_notes)


def _lora_target_name(name: str, module) -> str:
    """A LoRA-wrapped module's suffix; for PEFT's ParamWrapper (target_parameters, PEFT 0.21)
    the owning module's suffix and the parameter, e.g. "experts.gate_up_proj"."""
    parameter = getattr(module, "parameter_name", None)
    if parameter is None:
        return name.rsplit(".", 1)[-1]
    owner = [part for part in name.split(".") if part != "base_layer"][-1]
    return f"{owner}.{parameter}"


class _MultiplierStraightThrough:
    """Note [PhiMoE MultiplierProcessor]: MultiplierProcessor.apply without autograd.Function."""

    @staticmethod
    def apply(scores, multiplier, selected_experts, masked_gates, mask_for_one):
        m = multiplier.detach()
        g = masked_gates.detach()
        h = m * (scores.gather(-1, selected_experts) - (g * scores).sum(-1, keepdim=True))
        return m * mask_for_one + (h - h.detach())


def apply_shims(model) -> list[str]:
    """Note [PhiMoE rotary seq_len], Note [PhiMoE MultiplierProcessor] (transformers 4); under
    transformers 5, hf5_shims.apply (Note [transformers 5 PhimoeMultiplier]). Returns the
    changes."""
    import types

    if hf5_shims.generation() >= 5:
        return hf5_shims.apply(model, _MultiplierStraightThrough)
    done = []
    if getattr(model.config, "model_type", "") == "phimoe":
        from transformers.models.phimoe import modeling_phimoe

        swap_class(modeling_phimoe, "MultiplierProcessor", _MultiplierStraightThrough)
        done.append(
            "modeling_phimoe.MultiplierProcessor -> straight-through formulation "
            "(same value and gradients)"
        )
    for name, mod in model.named_modules():
        if type(mod).__name__ == "PhimoeRotaryEmbedding" and not getattr(mod, "_bench_shim", 0):
            orig = mod.forward

            def forward(self, x, seq_len=None, _orig=orig):
                # training, no cache: cache_position[-1] + 1 == the sequence length
                return _orig(x, seq_len=x.shape[1])

            mod.forward = types.MethodType(forward, mod)
            mod._bench_shim = 1
            done.append(
                f"{name}: PhimoeRotaryEmbedding seq_len = hidden_states.shape[1] "
                "(was the tensor cache_position[-1] + 1)"
            )
    return done


def remove_shims() -> list[str]:
    """Undoes the process-wide part of apply_shims (tests build both ways in one process)."""
    import sys

    mp = sys.modules.get("transformers.models.phimoe.modeling_phimoe")
    if mp is not None:
        restore_class(mp, "MultiplierProcessor")
        hf5_shims.remove(mp)
    return []


def expert_shape(cfg) -> tuple[int, int, int, int]:
    """(hidden, ffn, experts, top_k) of a built config."""
    # DBRX's sizes live in ffn_config (Note [DBRX naming]).
    if cfg.model_type == "dbrx":
        f = cfg.ffn_config
        return cfg.d_model, f.ffn_hidden_size, f.moe_num_experts, f.moe_top_k
    experts = getattr(cfg, "num_experts", None) or cfg.num_local_experts
    return cfg.hidden_size, cfg.intermediate_size, experts, cfg.num_experts_per_tok


def batch(
    step: int, mbs: int, seq_length: int, vocab: int, seed: int, device: str | torch.device
) -> torch.Tensor:
    """Random token ids for one step: the same for every backend (depends on seed and step)."""
    g = torch.Generator(device="cpu").manual_seed(seed * 1_000_003 + step)
    return torch.randint(0, vocab, (mbs, seq_length), generator=g).to(device)
