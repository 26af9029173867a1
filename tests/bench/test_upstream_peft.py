"""bench/upstream_peft: upstream's own benchmark_peft.py, as installed, in its multi-device mode
(torchrun --nproc_per_node 2, so WORLD_SIZE > 1 and the script shards the model with its FSDP2
`setup_fsdp2`), on CPU with gloo (offline.distributed_cpu_redirects), eager beside dyngen: the
script runs to its end on both ranks, dyngen compiles nothing after the first step and records no
fallback, and its losses follow eager's."""

import pytest
from upstream_runner import run_upstream


@pytest.mark.slow
def test_upstream_script_under_torchrun_with_fsdp2(tmp_path):
    runs = run_upstream(
        tmp_path,
        "allenai/OLMoE-1B-7B-0924",
        *("--nproc-per-node", "2", "--max-steps", "4", "--layers", "1", "--seq-length", "64"),
    )
    for rank in (0, 1):
        eager, dyn = runs["eager"][rank], runs["dyngen"][rank]
        assert eager["world_size"] == dyn["world_size"] == 2 and dyn["rank"] == rank
        assert eager["status"] == dyn["status"] == "ok", (eager["status"], dyn["status"])
        assert len(dyn["steps"]) == len(eager["steps"]) == 4
        assert dyn["steps"][0]["dyngen_compiles"] > 0  # the expert graphs went to dyngen
        for s in dyn["steps"][1:]:
            assert s["dyngen_compiles"] == 0 and s["thunder_cache_misses"] == 0, dyn["steps"]
        assert all(s["dyngen_fallbacks"] == 0 for s in dyn["steps"]) and not dyn["fallbacks"]
        for a, b in zip(dyn["steps"], eager["steps"]):
            assert abs(a["loss"] - b["loss"]) < 1e-3, (dyn["steps"], eager["steps"])
