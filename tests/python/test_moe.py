"""transformers' OlmoeSparseMoeBlock (tiny OlmoeConfig) with PEFT LoRA on its experts, trained under
dyngen.thunderfx: matches eager, and after two warm-up steps new routings compile nothing."""

import copy

import torch
from helpers import assert_close_bf16, grads_of
from torch import nn

import dyngen
import dyngen.thunderfx

HIDDEN, FFN, EXPERTS, TOP_K, TOKENS = 64, 32, 4, 2, 32


class Block(nn.Module):
    def __init__(self, cfg):
        from transformers.models.olmoe.modeling_olmoe import OlmoeSparseMoeBlock

        super().__init__()
        self.moe = OlmoeSparseMoeBlock(cfg)

    def forward(self, x):
        return self.moe(x)


def make_model():
    from peft import LoraConfig, get_peft_model
    from transformers.models.olmoe.configuration_olmoe import OlmoeConfig

    torch.manual_seed(0)
    cfg = OlmoeConfig(
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_experts=EXPERTS,
        num_experts_per_tok=TOP_K,
        norm_topk_prob=False,
    )
    model = get_peft_model(
        Block(cfg).to(torch.bfloat16),
        LoraConfig(r=4, lora_alpha=8, target_modules=["gate_proj", "up_proj", "down_proj"]),
    )
    for name, p in model.named_parameters():
        if "lora_B" in name:
            nn.init.normal_(p, std=0.02)
    return model


def inputs(model, seed):
    """A batch whose routing gives every expert at least 2 tokens (Dynamo specializes 0 and 1)."""
    gate = model.base_model.model.moe.gate
    while True:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(2, TOKENS // 2, HIDDEN, generator=g).to(torch.bfloat16)
        with torch.no_grad():
            picked = torch.topk(gate(x.view(-1, HIDDEN)).float().softmax(-1), TOP_K, -1).indices
        counts = torch.bincount(picked.flatten(), minlength=EXPERTS)
        if counts.min() >= 2:
            return x, counts.tolist()
        seed += 1000


def compiles():
    s = dyngen.stats()
    dyn = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    return (
        s["backend_calls"],
        s["graphs_compiled"],
        s["exported_graphs"],
        s["thunder_cache_misses"],
        dyn,
    )


def test_olmoe_moe_block_lora_training(fresh):
    torch._dynamo.utils.counters.clear()
    model = make_model()
    eager = copy.deepcopy(model)
    # Today's per-expert route (test_moe_grouped.py trains the grouped one, the default).
    compiled = dyngen.thunderfx.compile(model, moe="loop")
    routings = set()
    for step in range(5):
        if step == 2:
            warm = compiles()  # after two warm-up steps
        x, counts = inputs(model, seed=step)
        routings.add(tuple(counts))
        x.requires_grad_(True)
        x_ref = x.detach().clone().requires_grad_(True)
        out, logits = compiled(x)
        (out.float().square().sum() + logits.float().sum()).backward()
        want, want_logits = eager(x_ref)
        (want.float().square().sum() + want_logits.float().sum()).backward()
        assert_close_bf16(out, want, f"step {step} output")
        assert_close_bf16(logits, want_logits, f"step {step} router logits")
        assert_close_bf16(x.grad, x_ref.grad, f"step {step} input grad")
    assert compiles() == warm, "a new routing compiled something"
    assert len(routings) >= 3
    got, ref = grads_of(model), grads_of(eager)
    lora = [k for k in ref if "lora_" in k]
    assert len(lora) == EXPERTS * 6
    for k in lora:
        assert_close_bf16(got[k], ref[k], k)
    s = dyngen.stats()
    # Dynamo skips the block's frame (a graph break inside the expert loop) and compiles the
    # expert MLP frame, shared by all experts: static once (Thunder), then symbolic (dyngen).
    assert (s["static_graphs"], s["dynamic_graphs"], s["graphs_compiled"]) == (1, 1, 2)
    assert s["fallbacks"] == []
