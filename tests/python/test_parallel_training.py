"""FSDP2 (torchrun --nproc_per_node 2, gloo) of the tiny OLMoE with LoRA, sharded as upstream's
benchmark_peft.py shards it, under dyngen.thunderfx beside eager FSDP2 on each rank, sequence
lengths changing every step (tests/ddp/fsdp2_lora.py): no compile after warm-up and no fallback on
either rank, losses within 1e-3 of eager at every step, LoRA gradients after the first backward
within bf16 tolerance per tensor (issue 17: 140% off before Note [Outputs that are views])."""

import pytest
from conftest import REPO
from torchrun import run_two_ranks

STEPS = 6


def run_ranks(tmp_path, model: str, backend: str = "dyngen") -> dict:
    # The reference executor (dyngen's CPU default): about 40 graphs per rank compiled under host
    # emulation would take the suite's budget several times over on 2 cores; the bug this test
    # guards is in the frontend (what the compiled graphs return, where graphs go), the same under
    # either executor, and the kernels' numerics are checked under emulation elsewhere.
    results_dir = tmp_path / "results"
    env = {
        "DYNGEN_CACHE_DIR": str(tmp_path / "cache"),
        "FSDP_RESULT_DIR": str(results_dir),
        "FSDP_MODEL": model,
        "FSDP_BACKEND": backend,
        "FSDP_STEPS": str(STEPS),
        "DYNGEN_EXECUTOR": "reference",
    }
    return run_two_ranks(REPO / "tests" / "ddp" / "fsdp2_lora.py", results_dir, env, 1800)


def check(results: dict) -> None:
    for rank, r in results.items():
        print(rank, r["loss"], r["loss_eager"], r["lora_grad_rel_global"], r["marks"])
        warm, end = r["marks"]["after_warmup"], r["marks"]["end"]
        assert end["fallbacks"] == 0, (rank, end["fallback_reasons"])
        for k in ("dynamo_compiles", "graphs_compiled", "backend_calls", "thunder_cache_misses"):
            assert end[k] == warm[k], (rank, k, warm, end)  # nothing compiled after warm-up
        assert len(set(r["lengths"])) == STEPS  # a new sequence length every step
        for step, (got, want) in enumerate(zip(r["loss"], r["loss_eager"])):
            assert abs(got - want) < 1e-3, (rank, step, r["loss"], r["loss_eager"])
        # bf16 tolerance per tensor: Thunder's and eager's bf16 kernels round apart by an ulp
        # (silu's backward, SDPA: Note [Checking graphs against eager] finds them at 0.3-0.6%),
        # which can move a token near a tie to another expert: those experts are left out and
        # counted (Note [Routing flips] in fsdp2_lora.py).
        assert r["lora_tensors"] > 0 and len(r["experts_routed_apart"]) <= 4, r
        same = r["lora_grad_rel_same_routing"]
        assert len(same) > r["lora_tensors"] * 0.9, (len(same), r["lora_tensors"])
        worst = max(same.items(), key=lambda kv: kv[1])
        assert worst[1] < 3e-2, (rank, worst)
        assert r["lora_grad_rel_global"] < 1e-2, (rank, r["lora_grad_rel_global"])


@pytest.mark.slow
def test_fsdp2_two_ranks_olmoe(tmp_path):
    check(run_ranks(tmp_path, "allenai/OLMoE-1B-7B-0924"))
