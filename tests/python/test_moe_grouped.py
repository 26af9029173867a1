"""The seed models' MoE blocks (tiny OLMoE, PhiMoE, DBRX as bench/moe_peft builds them, PEFT LoRA
on every linear) under dyngen.thunderfx.compile with moe="grouped": trained for several steps with
the token count changing every step, against eager; nothing compiles after warm-up, nothing falls
back, no `aten::nonzero` runs, and Dynamo looks up fewer cache entries than with moe="loop"."""

import copy
import sys

import pytest
import torch
from conftest import REPO
from helpers import assert_close_bf16, assert_grad_close, grads_of
from torch import nn

import dyngen
import dyngen.thunderfx

sys.path.insert(0, str(REPO / "bench" / "moe_peft"))
import models as bench_models  # noqa: E402  (bench/moe_peft/models.py)

OLMOE, PHIMOE, DBRX = (
    "allenai/OLMoE-1B-7B-0924",
    "microsoft/Phi-3.5-MoE-instruct",
    "Undi95/dbrx-base",
)
BLOCK_NAME = "base_model.model.moe"
SEQ_LENGTHS = [5, 9, 12, 17, 23, 30]  # batch 2: T = 10, 18, ... a new token count every step
WARMUP = 2  # the first call is static, the second symbolic (Note [Which graphs are dynamic])


class Block(nn.Module):
    """One MoE block of `name`'s tiny config; the output and the router's logits (OLMoE, PhiMoE)
    or routing probabilities (DBRX) are what the block returns."""

    def __init__(self, name: str):
        super().__init__()
        self.config = bench_models.make_config(name, "tiny")
        kind = self.config.model_type
        if kind == "olmoe":
            from transformers.models.olmoe.modeling_olmoe import OlmoeSparseMoeBlock as Moe
        elif kind == "phimoe":
            from transformers.models.phimoe.modeling_phimoe import PhimoeSparseMoeBlock as Moe
        else:
            from transformers.models.dbrx.modeling_dbrx import DbrxFFN as Moe
        self.moe = Moe(self.config)
        self.hidden = bench_models.expert_shape(self.config)[0]

    def forward(self, x):
        # A decoder layer hands the block a computed tensor: PhiMoE's input jitter multiplies it
        # in place, which a leaf that requires grad does not allow.
        return self.moe(x.clone())


def build(name: str):
    """The block in bf16 with PEFT LoRA as bench/moe_peft places it (r=16, alpha=32, every linear;
    lora_B non-zero), the PhiMoE shims of bench_models.apply_shims, and an eager copy."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    block = Block(name).to(torch.bfloat16)
    with torch.no_grad():
        for p in block.parameters():  # DBRX's fused experts are created uninitialized
            p.copy_(torch.randn_like(p) * 0.05)
    bench_models.apply_shims(block)
    lora = LoraConfig(
        r=bench_models.LORA_R,
        lora_alpha=bench_models.LORA_ALPHA,
        lora_dropout=0.0,
        target_modules="all-linear",
        bias="none",
    )
    model = get_peft_model(block, lora)
    model.train()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_((torch.randn(p.shape, generator=g) * 0.02).to(p.dtype))
    return model, copy.deepcopy(model)


def step(model, x, seed):
    """Forward + backward of one batch; PyTorch's generator seeded alike for every route (the
    routers' jitter and Gumbel draws)."""
    torch.manual_seed(seed)
    out, router = model(x)
    (out.float().square().sum() + router.float().square().sum()).backward()
    return out, router


def batch(model, seq: int, seed: int):
    hidden = model.base_model.model.hidden
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, seq, hidden, generator=g).to(torch.bfloat16)


def record_ties(model, k: int, into: set):
    """Note [Routing flips] in tests/ddp/fsdp2_lora.py, for a tie: a token whose k-th and
    (k+1)-th router logits are equal picks either expert, and eager's topk and dyngen's break the
    tie apart (both valid). That token's output then differs, and with it the gradient of every
    expert it reached: all the experts of its top k + 1 are added to `into`."""

    @torch._dynamo.disable
    def hook(module, args, logits):
        v = logits.detach().float()
        top = v.topk(k + 1, dim=-1)
        tied = top.values[:, k - 1] == top.values[:, k]
        into.update(top.indices[tied].flatten().tolist())

    router = next(m for n, m in model.named_modules() if n.endswith(("moe.gate", "router.layer")))
    return router.register_forward_hook(hook)


def check_lora_grads(model, eager, tied: set, what: str) -> None:
    """Each LoRA gradient within the parallel-training tolerance of eager's, but those of the
    experts in `tied` (record_ties), which must leave at least half of them compared; all of
    them together within 1e-2 (the parallel-training test's global bound for OLMoE)."""
    got, ref = grads_of(model), grads_of(eager)
    lora = [n for n in ref if "lora_" in n]
    compared = [n for n in lora if not any(f".experts.{e}." in n for e in tied)]
    assert len(compared) >= 0.5 * len(lora), (what, len(compared), len(lora), tied)
    for n in compared:
        assert_grad_close(got[n], ref[n], f"{what}: {n}")
    everything = [torch.cat([d[n].flatten() for n in lora]) for d in (got, ref)]
    assert_grad_close(*everything, f"{what}: all LoRA gradients", rel=1e-2)
    # PhiMoE's and DBRX's loops skip an expert no token picked (its LoRA gets no gradient at
    # all); the grouped route gives it zeros.
    assert all(not got[n].any() for n in set(got) - set(ref)), what


def compiles():
    s = dyngen.stats()
    dyn = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    return s["backend_calls"], s["graphs_compiled"], s["exported_graphs"], dyn


def profile_step(compiled, x, seed) -> dict:
    """Per-step counts of the events the issue measures, from torch.profiler on the CPU."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step(compiled, x, seed)
    names = [e.name for e in prof.events()]
    return {
        "nonzero": names.count("aten::nonzero"),
        "cache_lookups": names.count("TorchDynamo Cache Lookup"),
    }


@pytest.mark.parametrize("name", [OLMOE, PHIMOE, DBRX])
def test_grouped_moe_block_trains_as_eager(fresh, reference_executor, name):
    torch._dynamo.utils.counters.clear()
    model, eager = build(name)
    compiled = dyngen.thunderfx.compile(model, moe="grouped")
    top_k = bench_models.expert_shape(model.base_model.model.config)[3]
    tied: set = set()
    record_ties(eager, top_k, tied)
    blocks = dyngen.stats()["moe_blocks"]
    moe_name = BLOCK_NAME + (".experts" if name == DBRX else "")
    assert blocks[moe_name]["route"] == "grouped", blocks
    for k, seq in enumerate(SEQ_LENGTHS):
        if k == WARMUP:
            warm = compiles()
        x = batch(model, seq, seed=k)
        xr = x.clone()
        x.requires_grad_(True)
        xr.requires_grad_(True)
        tied.clear()
        model.zero_grad(set_to_none=True)
        eager.zero_grad(set_to_none=True)
        out, router = step(compiled, x, seed=100 + k)
        want, want_router = step(eager, xr, seed=100 + k)
        assert_close_bf16(out, want, f"step {k}: output")
        assert_close_bf16(router, want_router, f"step {k}: router")
        assert_grad_close(x.grad, xr.grad, f"step {k}: input grad")
        check_lora_grads(model, eager, tied, f"step {k}")
    assert compiles() == warm, "a new token count compiled something"
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    assert s["graphs_where"]["thunder"] == 0 and s["graphs_where"]["eager"] == 0, s
    counts = profile_step(compiled, batch(model, 37, seed=99), seed=7)
    assert counts["nonzero"] == 0, counts


@pytest.mark.parametrize("name", [OLMOE, DBRX])
def test_grouped_route_looks_up_fewer_graphs_than_the_loop(fresh, reference_executor, name):
    """Dynamo's cache lookups per training step after warm-up: the loop route enters one frame
    per expert call, the grouped one the block's frame once; the loop's nonzero calls show what
    the profile would catch. The loop route is today's, fallbacks included (DBRX's expert graph
    has an ATen copy_), so it runs without DYNGEN_STRICT."""
    from dyngen.options import options, set_options

    saved = options()
    lookups = {}
    try:
        for route in ("loop", "grouped"):
            torch._dynamo.reset()
            set_options(strict=saved.strict and route == "grouped")
            model, _ = build(name)
            compiled = dyngen.thunderfx.compile(model, moe=route)
            for k, seq in enumerate(SEQ_LENGTHS[:3]):
                step(compiled, batch(model, seq, seed=k), seed=k)
            counts = profile_step(compiled, batch(model, 37, seed=99), seed=7)
            lookups[route] = counts["cache_lookups"]
            assert (counts["nonzero"] > 0) == (route == "loop"), (route, counts)
    finally:
        set_options(**saved.__dict__)
    assert lookups["grouped"] < lookups["loop"], lookups
    assert lookups["grouped"] <= 3, lookups


def test_blocks_not_grouped_say_why_and_the_swap_undoes(fresh):
    """moe="loop", a LoRA variant the grouped route does not compute (DoRA), and a MoE block
    without an adapter keep their own forward, each with its reason in stats(); undo() gives
    the grouped blocks their class's forward back."""
    from peft import LoraConfig, get_peft_model

    from dyngen.moe.adapters import GroupedRoute

    model, _ = build(OLMOE)
    block = model.base_model.model.moe
    route = GroupedRoute(model)
    assert block.forward.__func__ is not type(block).forward
    assert dyngen.stats()["moe_blocks"][BLOCK_NAME]["route"] == "grouped"
    route.undo()
    assert "forward" not in block.__dict__ and "_dyngen_moe_name" not in block.__dict__
    assert dyngen.stats()["moe_blocks"][BLOCK_NAME] == {
        "class": "OlmoeSparseMoeBlock",
        "route": "loop",
        "reason": "undone",
    }

    dyngen.thunderfx.compile(model, moe="loop")
    assert dyngen.stats()["moe_blocks"][BLOCK_NAME]["reason"] == "moe='loop' asked"
    assert "forward" not in block.__dict__

    torch.manual_seed(0)
    dora = get_peft_model(Block(OLMOE), LoraConfig(r=4, target_modules="all-linear", use_dora=True))
    GroupedRoute(dora)
    assert "DoRA" in dyngen.stats()["moe_blocks"][BLOCK_NAME]["reason"]

    class Other(nn.Module):
        def __init__(self):
            super().__init__()
            self.experts = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    holder = nn.Sequential(Other())
    GroupedRoute(holder)
    assert dyngen.stats()["moe_blocks"]["0"] == {
        "class": "Other",
        "route": "loop",
        "reason": "no grouped-experts adapter for Other",
    }
