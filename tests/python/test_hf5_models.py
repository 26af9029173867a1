"""bench/moe_peft's four tiny models under transformers 5 + PEFT 0.21 (the .venv-hf5 overlay:
PYTHONPATH=.venv-hf5): the LoRA placement PEFT makes of "all-linear" there, the shims of
bench/moe_peft/hf5_shims.py, and one eager training step. Skipped on the pinned generation."""

import os
import sys
from pathlib import Path

import pytest
import torch

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
    another structure; the grouped route must leave them to their own code and say why (before
    this check the default compile crashed on every transformers 5 model)."""
    import dyngen
    import dyngen.thunderfx

    built = models.build(name, scale="tiny", num_layers=1)
    compiled = dyngen.thunderfx.compile(built.model)
    blocks = dyngen.stats()["moe_blocks"]
    assert blocks and all(b["route"] == "loop" for b in blocks.values()), blocks
    assert all("transformers" in b["reason"] for b in blocks.values()), blocks
    assert compiled.moe_route.grouped == {}
