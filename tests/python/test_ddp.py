"""Data-parallel training (torchrun --nproc_per_node 2, gloo) of the tiny OLMoE with LoRA under
dyngen.thunderfx: no compile after warm-up on either rank, rank 1's kernels from the disk cache
rank 0 filled, and identical adapters on both ranks (tests/ddp/ddp_lora.py)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.slow
def test_ddp_two_ranks_share_the_kernel_cache(tmp_path):
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    env = dict(os.environ, DYNGEN_CACHE_DIR=str(tmp_path / "cache"), OMP_NUM_THREADS="1",
               DDP_RESULT_DIR=str(results_dir))
    env.setdefault("DYNGEN_EXECUTOR", "emulate")  # kernels, not the reference executor
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                        "--master_port", str(29500 + os.getpid() % 1000),
                        str(REPO / "tests" / "ddp" / "ddp_lora.py")],
                       env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    # One file per rank: the two ranks' prints can share a line of the common stdout.
    results = {r["rank"]: r for r in (json.loads(f.read_text())
                                      for f in sorted(results_dir.glob("rank*.json")))}
    assert sorted(results) == [0, 1], p.stdout[-2000:]
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
