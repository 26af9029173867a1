"""Data-parallel training (torchrun --nproc_per_node 2, gloo) of the tiny OLMoE with LoRA under
dyngen.thunderfx: no compile after warm-up on either rank, rank 1's kernels from the disk cache
rank 0 filled, and identical adapters on both ranks (tests/ddp/ddp_lora.py)."""

import json
import os

import pytest
from conftest import REPO
from torchrun import run_two_ranks


@pytest.mark.slow
def test_ddp_two_ranks_share_the_kernel_cache(tmp_path):
    results_dir = tmp_path / "results"
    env = {
        "DYNGEN_CACHE_DIR": str(tmp_path / "cache"),
        "DDP_RESULT_DIR": str(results_dir),
        # kernels, not the ATen executor
        "DYNGEN_EXECUTOR": os.environ.get("DYNGEN_EXECUTOR", "emulate"),
    }
    results = run_two_ranks(REPO / "tests" / "ddp" / "ddp_lora.py", results_dir, env, 900)
    print(json.dumps(results, indent=1))
    for rank, r in results.items():
        warm, end = r["after_warmup"], r["end"]
        assert warm["executor"] == "emulate" and end["fallbacks"] == 0, r
        # An expert's forward and backward at least, compiled or taken from a cache.
        assert end["graphs_compiled"] + end["cache_hits_memory"] >= 2, r
        for k in ("nvrtc_compiles", "graphs_compiled", "backend_calls", "thunder_cache_misses"):
            assert end[k] == warm[k], (rank, k, warm, end)  # nothing compiled after warm-up
        assert r["adapters_identical"] and r["lora_numel"] > 0
    # Rank 0 compiled everything before DDP started; rank 1 compiled nothing itself.
    assert results[1]["end"]["nvrtc_compiles"] == 0, results[1]
    assert results[1]["end"]["cache_hits_disk"] >= 2, results[1]
