"""Training across 2 ranks (torchrun --nproc_per_node 2, gloo) of the tiny OLMoE and DBRX with
LoRA under dyngen.thunderfx, beside the same model trained eagerly the same way on each rank,
sequence lengths changing every step (tests/ddp/fsdp2_lora.py): FSDP2 sharded as upstream's
benchmark_peft.py shards it, and DistributedDataParallel. No compile after warm-up and no fallback
on either rank, losses within 1e-3 of eager at every step, LoRA gradients after the first
backward within bf16 tolerance per tensor (140% off before Note [Outputs that are
views])."""

import pytest
from conftest import REPO
from torchrun import run_two_ranks

OLMOE, DBRX = "allenai/OLMoE-1B-7B-0924", "Undi95/dbrx-base"
# The LoRA gradients' relative difference over all tensors after the first backward. OLMoE has
# 120 LoRA tensors (every expert's); DBRX's experts are fused parameters without LoRA, so its 6
# tensors are the attention's and the router's, where Thunder's bf16 rounding (Note [Checking
# graphs against eager]: 0.3-0.4% per graph) adds up to 2.5% on the first layers.
GLOBAL_GRAD_REL = {OLMOE: 1e-2, DBRX: 3e-2}


def warmup(model: str, parallel: str) -> int:
    """Steps before no compile (fsdp2_lora.py's WARMUP): Dynamo compiles DDP-split DBRX frames
    until its fifth step whatever the backend."""
    return 5 if (model, parallel) == (DBRX, "ddp") else 3


def run_ranks(tmp_path, model: str, parallel: str = "fsdp2") -> dict:
    # The ATen executor (dyngen's CPU default, DYNGEN_EXECUTOR=reference): about 40 graphs per
    # rank compiled under host emulation would take the suite's budget several times over on 2
    # cores; the bug this test guards is in the frontend (what the compiled graphs return, where
    # graphs go), the same under either executor, and the kernels' numerics are checked under
    # emulation elsewhere.
    results_dir = tmp_path / "results"
    env = {
        "DYNGEN_CACHE_DIR": str(tmp_path / "cache"),
        "FSDP_RESULT_DIR": str(results_dir),
        "FSDP_MODEL": model,
        "FSDP_BACKEND": "dyngen",
        "FSDP_PARALLEL": parallel,
        "FSDP_STEPS": str(warmup(model, parallel) + 3),
        "FSDP_WARMUP": str(warmup(model, parallel)),
        "DYNGEN_EXECUTOR": "reference",
    }
    return run_two_ranks(REPO / "tests" / "ddp" / "fsdp2_lora.py", results_dir, env, 1800)


def check(results: dict, model: str) -> None:
    for rank, r in results.items():
        print(rank, r["loss"], r["loss_eager"], r["lora_grad_rel_global"], r["marks"])
        warm, end = r["marks"]["after_warmup"], r["marks"]["end"]
        assert end["fallbacks"] == 0, (rank, end["fallback_reasons"])
        for k in ("dynamo_compiles", "graphs_compiled", "backend_calls", "thunder_cache_misses"):
            assert end[k] == warm[k], (rank, k, warm, end)  # nothing compiled after warm-up
        assert len(set(r["lengths"])) == len(r["lengths"])  # a new sequence length every step
        for step, (got, want) in enumerate(zip(r["loss"], r["loss_eager"])):
            assert abs(got - want) < 1e-3, (rank, step, r["loss"], r["loss_eager"])
        # bf16 tolerance per tensor: Thunder's and eager's bf16 kernels round apart by an ulp
        # (silu's backward, SDPA: Note [Checking graphs against eager] finds them at 0.3-0.6%),
        # which can move a token near a tie to another expert: those experts are left out and
        # counted (Note [Routing flips] in fsdp2_lora.py).
        # Ties at the k-th place count too, and the router of such a token. At most 12 of OLMoE's
        # 64 experts (grouped route, DDP measured 8); nothing but experts and routers left out.
        apart = r["experts_routed_apart"]
        assert r["lora_tensors"] > 0 and sum(".experts." in n for n in apart) <= 12, r
        same = r["lora_grad_rel_same_routing"]
        left_out = set(r["lora_grad_rel"]) - set(same)
        assert all(any(a in n for a in apart) for n in left_out), sorted(left_out)
        assert any(".experts." not in n and n in same for n in r["lora_grad_rel"])
        worst = max(same.items(), key=lambda kv: kv[1])
        assert worst[1] < 3e-2, (rank, worst)
        assert r["lora_grad_rel_global"] < GLOBAL_GRAD_REL[model], (rank, r)


@pytest.mark.slow
@pytest.mark.parametrize("model", [OLMOE, DBRX])
@pytest.mark.parametrize("parallel", ["fsdp2", "ddp"])
def test_two_ranks_train_as_eager(tmp_path, model, parallel):
    check(run_ranks(tmp_path, model, parallel), model)
