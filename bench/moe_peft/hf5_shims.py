"""What the benchmark changes in transformers 5 + PEFT 0.21 models (models.py applies these when
transformers >= 5 is imported; the pinned 4.57 + 0.17 generation keeps models.py's own shims).

Note [transformers 5 PhimoeMultiplier]
transformers 5 renamed PhiMoE's MultiplierProcessor to PhimoeMultiplier: the same
torch.autograd.Function (forward `multiplier * mask_for_one`, a Heun-style backward to `scores`),
so ThunderFX still gets its output shape wrong (Note [PhiMoE MultiplierProcessor] in models.py).
The shim replaces it with the same straight-through formulation, for every backend alike.

Note [transformers 5 PhiMoE rotary]
transformers 5's PhimoeRotaryEmbedding.forward(x, position_ids) reads
`seq_len = torch.max(position_ids) + 1` and branches on it in Python (`... and seq_len:`,
`seq_len > original_max_position_embeddings`) to pick longrope's mscale: a data-dependent branch,
so Dynamo breaks the graph there (a host sync, a partial graph) whenever rope_type is not
"default" (Phi-3.5-MoE's longrope; GRIN-MoE's plain RoPE never reads it). Its
@dynamic_rope_update decorator also copies a where(seq_len > ...) choice into the inv_freq buffer,
which this forward never reads (it recomputes inv_freq from the config). In training, with no
KV cache, position_ids is arange(S), so max + 1 == position_ids.shape[-1]; the shim takes that
int and otherwise computes exactly what the original does (the same mscale, inv_freq, cos, sin).
This is the transformers 5 form of Note [PhiMoE rotary seq_len] in models.py.

Note [transformers 5 PhiMoE router and all-linear]
PhimoeTopKRouter subclasses nn.Linear but returns (logits, weights, experts), so PEFT's
"all-linear" wraps it in a lora.Linear whose forward adds the adapter to that tuple and fails.
A user must exclude it (`exclude_modules`); the benchmark does the same (lora_exclude). The 4.57
router is a plain nn.Linear (`gate`) that LoRA wraps as before.
"""

from __future__ import annotations

import types

import torch
from class_swap import restore_class, swap_class


def generation() -> int:
    """The major version of the imported transformers (4 or 5)."""
    import transformers

    return int(transformers.__version__.split(".")[0])


def lora_exclude(model) -> list[str]:
    """Note [transformers 5 PhiMoE router and all-linear]: module names LoRA must leave alone."""
    return sorted(
        {
            name.rsplit(".", 1)[-1]
            for name, mod in model.named_modules()
            if type(mod).__name__ == "PhimoeTopKRouter"
        }
    )


@torch.no_grad()
def _phimoe_rotary_forward(self, x, position_ids=None):
    """Note [transformers 5 PhiMoE rotary]: the original's values with seq_len from the shape."""
    seq_len = position_ids.shape[-1]  # training, no cache: max(position_ids) + 1
    rope = self.config.rope_parameters
    mscale = None
    if rope["rope_type"] != "default" and seq_len:
        over = seq_len > rope["original_max_position_embeddings"]
        mscale = rope["long_mscale"] if over else rope["short_mscale"]
    inv_freq, attention_scaling = self.rope_init_fn(self.config)
    mscale = attention_scaling if mscale is None else mscale
    freqs = position_ids[..., None].float() * inv_freq.to(device=x.device, dtype=torch.float)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos() * mscale
    sin = emb.sin() * mscale
    return cos.to(x.dtype), sin.to(x.dtype)


def apply(model, multiplier_straight_through) -> list[str]:
    """Notes [transformers 5 PhimoeMultiplier] and [transformers 5 PhiMoE rotary]."""
    done = []
    if getattr(model.config, "model_type", "") == "phimoe":
        from transformers.models.phimoe import modeling_phimoe

        swap_class(modeling_phimoe, "PhimoeMultiplier", multiplier_straight_through)
        done.append(
            "modeling_phimoe.PhimoeMultiplier -> straight-through formulation "
            "(same value and gradients)"
        )
    for name, mod in model.named_modules():
        if type(mod).__name__ == "PhimoeRotaryEmbedding" and not getattr(mod, "_bench_shim", 0):
            mod.forward = types.MethodType(_phimoe_rotary_forward, mod)
            mod._bench_shim = 1
            done.append(
                f"{name}: PhimoeRotaryEmbedding seq_len = position_ids.shape[-1] "
                "(was the tensor max(position_ids) + 1)"
            )
    return done


def remove(modeling_phimoe) -> None:
    """Undoes the process-wide part of apply."""
    restore_class(modeling_phimoe, "PhimoeMultiplier")
