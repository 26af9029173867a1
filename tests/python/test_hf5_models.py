"""bench/moe_peft's four tiny models under transformers 5 + PEFT 0.21 (the .venv-hf5 overlay:
PYTHONPATH=.venv-hf5): the LoRA placement PEFT makes of "all-linear" there, the shims of
bench/moe_peft/hf5_shims.py, and one eager training step. Skipped on the pinned generation."""

import copy
import logging
import os
import sys
from pathlib import Path

import pytest
import torch
from helpers import assert_close_bf16, assert_grad_close, grads_of

transformers = pytest.importorskip("transformers")
if int(transformers.__version__.split(".")[0]) < 5:
    if os.environ.get("DYNGEN_REQUIRE_HF5") == "1":  # scripts/test.sh's run on the overlay
        raise RuntimeError(f"DYNGEN_REQUIRE_HF5=1 but transformers is {transformers.__version__}")
    pytest.skip(
        f"transformers {transformers.__version__}: these need transformers 5 "
        "(PYTHONPATH=.venv-hf5, requirements-hf5.txt)",
        allow_module_level=True,
    )

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "moe_peft"))
import hf5_shims  # noqa: E402
import models  # noqa: E402

OLMOE = "allenai/OLMoE-1B-7B-0924"
ATTENTION = ["k_proj", "o_proj", "q_proj", "v_proj"]
LORA = {
    # PEFT 0.21 turns all-linear on OLMoE's fused experts and router into target_parameters
    "allenai/OLMoE-1B-7B-0924": [
        "experts.down_proj",
        "experts.gate_up_proj",
        "gate.weight",
        *ATTENTION,
    ],
    # the router is excluded (Note [transformers 5 PhiMoE router and all-linear]); PEFT does not
    # target PhiMoE's fused experts
    "microsoft/Phi-3.5-MoE-instruct": ATTENTION,
    "microsoft/GRIN-MoE": ATTENTION,
    "Undi95/dbrx-base": ["Wqkv", "layer", "out_proj"],
}


@pytest.mark.parametrize("name", models.MODEL_NAMES)
def test_tiny_model_lora_placement_and_one_step(name):
    built = models.build(name, scale="tiny", num_layers=1)
    assert built.lora_modules == LORA[name]
    phimoe = built.config.model_type == "phimoe"
    assert len(built.shims) == (2 if phimoe else 0), built.shims
    ids = models.batch(0, 1, 9, built.vocab_size, 0, "cpu")
    torch.manual_seed(0)
    loss = built.model(input_ids=ids, labels=ids).loss
    loss.backward()
    assert torch.isfinite(loss)
    grads = [p.grad for p in built.model.parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("name", ["microsoft/Phi-3.5-MoE-instruct", "microsoft/GRIN-MoE"])
@pytest.mark.parametrize("length", [9, 5000])  # below and above original_max_position_embeddings
def test_phimoe_rotary_shim_matches_the_original(name, length):
    """Note [transformers 5 PhiMoE rotary]: the same cos and sin as the model's own forward."""
    from transformers.models.phimoe.modeling_phimoe import PhimoeRotaryEmbedding

    rotary = PhimoeRotaryEmbedding(models.make_config(name, "tiny", 1))
    x = torch.randn(1, length, 8, dtype=torch.bfloat16)
    positions = torch.arange(length)[None]
    want = rotary(x, positions)
    got = hf5_shims._phimoe_rotary_forward(rotary, x, positions)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("name", ["allenai/OLMoE-1B-7B-0924", "Undi95/dbrx-base"])
def test_fused_experts_keep_their_own_route_under_dyngen(name, fresh):
    """transformers 5 keeps the 4.57 class names (OlmoeSparseMoeBlock, DbrxExperts) for blocks of
    another structure; the 4.57 adapters must leave them to their own code and say why (before
    this check the default compile crashed on every transformers 5 model). OLMoE's fused experts,
    wrapped by PEFT, take the ParamWrapper route instead (Note [PEFT ParamWrapper on fused
    experts]); DBRX's experts, which PEFT does not wrap, keep their loop."""
    import dyngen
    import dyngen.thunderfx

    built = models.build(name, scale="tiny", num_layers=1)
    compiled = dyngen.thunderfx.compile(built.model)
    names = {n for n, _ in built.model.named_modules()}  # reset_stats() keeps earlier models'
    blocks = {n: b for n, b in dyngen.stats()["moe_blocks"].items() if n in names}
    wrapped = {n for n, b in blocks.items() if b["class"].startswith("ParamWrapper(")}
    adapted = {n: b for n, b in blocks.items() if n not in wrapped}
    assert adapted and all(b["route"] == "loop" for b in adapted.values()), blocks
    assert all("transformers" in b["reason"] for b in adapted.values()), blocks
    olmoe = name == OLMOE
    assert wrapped == ({"base_model.model.model.layers.0.mlp.experts"} if olmoe else set())
    assert all(blocks[n]["route"] == "grouped" for n in wrapped), blocks
    assert set(compiled.moe_route.grouped) == wrapped


LENGTHS = (20, 27, 14, 33, 18, 25, 30, 12, 23, 16)  # a new sequence length every step
WARMUP = 2  # the first call is static, the second symbolic (Note [Which graphs are dynamic])


class _LimitWarnings(logging.Handler):
    """Dynamo's "hit config.recompile_limit" warnings (a frame it gave up compiling)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record):
        self.count += "recompile_limit" in record.getMessage()


class Holder(torch.nn.Module):
    """One PEFT-wrapped module of a built model, called on a computed tensor."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x.clone())


def olmoe_moe_block():
    """The tiny OLMoE's MoE block as bench/moe_peft builds it (PEFT 0.21 all-linear: ParamWrappers
    on gate.weight, experts.gate_up_proj and experts.down_proj; lora_B non-zero), held alone, and
    an eager copy."""
    built = models.build(OLMOE, scale="tiny", num_layers=1)
    block = Holder(built.model.base_model.model.model.layers[0].mlp)
    return block, copy.deepcopy(block), built.config


def tied_tokens(router, top_k: int, into: dict):
    """Note [Routing flips] in tests/ddp/fsdp2_lora.py: a token whose k-th and (k+1)-th router
    logits are equal (bf16 logits over 64 experts tie often) picks either expert, and eager's topk
    and dyngen's break the tie apart. The eager router's hook puts those tokens in into["tokens"]
    and every expert of their top k + 1 in into["experts"]."""

    def hook(module, args, out):
        top = out[0].detach().float().topk(top_k + 1, dim=-1)
        tied = top.values[:, top_k - 1] == top.values[:, top_k]
        into["tokens"] = tied
        into["experts"] = set(top.indices[tied].flatten().tolist())

    return router.register_forward_hook(hook)


def expert_rows(name: str, grad: torch.Tensor, experts: int, keep) -> torch.Tensor:
    """The entries of a fused LoRA factor's gradient that belong to the experts in `keep`
    (Note [PEFT ParamWrapper on fused experts]: A's rows e*r.., B's columns j*E + e)."""
    if "lora_A" in name:
        return grad.view(experts, -1, grad.shape[-1])[keep]
    return grad.view(grad.shape[0], -1, experts)[:, :, keep]


def test_param_wrapper_lora_layout_is_peft_delta():
    """Note [PEFT ParamWrapper on fused experts]: the factors read as [E, r, K] and [E, N, r] give
    PEFT's own delta weight exactly, for both fused parameters."""
    from dyngen.moe.peft_param_wrapper import lora_factors

    block, _, _ = olmoe_moe_block()
    outer = block.inner.experts
    for wrapper in (outer, outer.base_layer):
        lora = lora_factors(wrapper)
        delta = torch.einsum("enr,erk->enk", lora.b[0], lora.a[0]) * lora.scaling
        want = wrapper.get_delta_weight("default")
        assert wrapper.num_experts > 1 and want.abs().max() > 0
        assert torch.equal(delta.to(want.dtype), want), wrapper.parameter_name


def test_olmoe_param_wrapper_lora_trains_as_eager_without_recompiles(fresh, reference_executor):
    """PEFT's ParamWrapper re-parametrizes at every forward (a new class each call: Dynamo's
    recompile limit under every backend). Under dyngen.thunderfx.compile the experts run
    grouped_experts with the LoRA factors and the router its folded weight: outputs, losses and
    LoRA gradients as eager's over ten lengths, nothing compiled after warm-up, no limit hit."""
    import dyngen
    import dyngen.thunderfx

    torch._dynamo.utils.counters.clear()
    starts = []
    torch._dynamo.callback.on_compile_start(lambda args: starts.append(args))
    limits = _LimitWarnings()
    logging.getLogger("torch._dynamo").addHandler(limits)
    try:
        block, eager, cfg = olmoe_moe_block()
        ties: dict = {}
        router_compared = 0
        tied_tokens(eager.inner.gate, cfg.num_experts_per_tok, ties)
        compiled = dyngen.thunderfx.compile(block)
        blocks = dyngen.stats()["moe_blocks"]
        experts = blocks["inner.experts"]
        assert experts == {"class": "ParamWrapper(OlmoeExperts)", "route": "grouped"}, blocks
        for k, seq in enumerate(LENGTHS):
            if k == WARMUP:
                warm = len(starts)
            g = torch.Generator().manual_seed(k)
            x = torch.randn(1, seq, cfg.hidden_size, generator=g).to(torch.bfloat16)
            xr = x.clone().requires_grad_(True)
            x.requires_grad_(True)
            block.zero_grad(set_to_none=True)
            eager.zero_grad(set_to_none=True)
            out, want = compiled(x), eager(xr)
            loss, want_loss = (o.float().square().mean() for o in (out, want))
            (loss * 1e3).backward()
            (want_loss * 1e3).backward()
            assert abs(float(loss) - float(want_loss)) <= 1e-3, (k, float(loss), float(want_loss))
            same = ~ties["tokens"]  # the tokens routed alike
            assert same.sum() >= 0.75 * seq, (k, ties)
            assert_close_bf16(out[0, same], want[0, same], f"step {k}: output")
            assert_grad_close(x.grad[0, same], xr.grad[0, same], f"step {k}: input grad")
            got, ref = grads_of(block), grads_of(eager)
            lora = [n for n in ref if "lora_" in n]
            assert sorted(got) == sorted(ref) and len(lora) == 6, sorted(ref)
            keep = [e for e in range(cfg.num_experts) if e not in ties["experts"]]
            for n in lora:
                if ".experts." in n:  # the experts of tied tokens apart
                    g, r = (expert_rows(n, d[n], cfg.num_experts, keep) for d in (got, ref))
                    assert_grad_close(g, r, f"step {k}: {n}")
                elif not ties["experts"]:  # the router's LoRA sees every token
                    assert_grad_close(got[n], ref[n], f"step {k}: {n}")
                    router_compared += 1
        assert len(starts) == warm, f"{len(starts) - warm} compiles after warm-up"
        assert router_compared >= 2, router_compared  # lora_A and lora_B at one step at least
    finally:
        logging.getLogger("torch._dynamo").removeHandler(limits)
    assert limits.count == 0
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    assert s["graphs_where"]["thunder"] == 0 and s["graphs_where"]["eager"] == 0, s
    compiled.moe_route.undo()
    assert "forward" not in block.inner.experts.__dict__
    assert "forward" not in block.inner.gate.__dict__
    assert dyngen.stats()["moe_blocks"]["inner.experts"]["route"] == "loop"


def test_param_wrapper_states_keep_peft_route_and_say_why(fresh):
    """Merged adapters keep PEFT's route, with the reason; moe="loop" too."""
    import dyngen
    from dyngen.moe.adapters import GroupedRoute

    block, _, _ = olmoe_moe_block()
    GroupedRoute(block, enabled=False)
    assert dyngen.stats()["moe_blocks"]["inner.experts"]["reason"] == "moe='loop' asked"
    block.inner.experts.merge()
    route = GroupedRoute(block)
    reason = dyngen.stats()["moe_blocks"]["inner.experts"]
    assert reason["route"] == "loop" and "merged" in reason["reason"], reason
    assert route.grouped == {} and "forward" not in block.inner.experts.__dict__


@pytest.mark.parametrize("lora", [False, True])
def test_experts_implementation_dyngen_matches_eager(lora):
    """experts_implementation="dyngen" (registered by importing dyngen.moe) against "eager" on
    the same weights: forward and gradients within bf16 rounding, eagerly; with PEFT LoRA on the
    experts too (PEFT's parametrized weights then go through the "dyngen" implementation)."""
    from transformers import AutoModelForCausalLM
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    import dyngen.moe  # noqa: F401  (registers "dyngen")

    assert "dyngen" in ALL_EXPERTS_FUNCTIONS
    runs = {}
    for impl in ("eager", "dyngen"):
        cfg = models.make_config(OLMOE, "tiny", 1)
        model = AutoModelForCausalLM.from_config(cfg, experts_implementation=impl)
        assert model.config._experts_implementation == impl
        model = model.to(torch.bfloat16)
        torch.manual_seed(0)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn_like(p) * 0.05)
        if lora:
            from peft import LoraConfig, get_peft_model

            experts = ["experts.gate_up_proj", "experts.down_proj"]
            model = get_peft_model(
                model, LoraConfig(r=4, target_parameters=experts, target_modules=[])
            )
            with torch.no_grad():  # lora_B non-zero, the same in both runs
                for n, p in model.named_parameters():
                    if "lora_B" in n:
                        p.copy_(torch.linspace(-0.02, 0.02, p.numel()).view_as(p))
        ids = models.batch(0, 2, 9, cfg.vocab_size, 0, "cpu")
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        runs[impl] = (out.logits, out.loss, grads)
    (logits, loss, grads), (want_logits, want_loss, want_grads) = runs["dyngen"], runs["eager"]
    assert_close_bf16(logits, want_logits, "logits")
    assert abs(float(loss) - float(want_loss)) <= 1e-3
    assert sorted(grads) == sorted(want_grads) and grads
    for n in grads:
        assert_grad_close(grads[n], want_grads[n], n)
