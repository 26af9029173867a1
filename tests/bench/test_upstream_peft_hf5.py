"""bench/upstream_peft on the second generation (transformers 5 + PEFT 0.21, the .venv-hf5
overlay: PYTHONPATH=.venv-hf5, which the runner's children inherit): upstream's own
benchmark_peft.py, as installed, under eager and dyngen on OLMoE (PEFT's ParamWrapper on the
router and the fused experts, Note [PEFT ParamWrapper on fused experts]) and DBRX. The script
runs to its end, dyngen compiles nothing after the first step, records no fallback, and its
losses follow eager's. Skipped on the pinned generation, an error there under
DYNGEN_REQUIRE_HF5=1 (scripts/test.sh's run on the overlay)."""

import os

import pytest
from upstream_runner import run_upstream

transformers = pytest.importorskip("transformers")
if int(transformers.__version__.split(".")[0]) < 5:
    if os.environ.get("DYNGEN_REQUIRE_HF5") == "1":
        raise RuntimeError(f"DYNGEN_REQUIRE_HF5=1 but transformers is {transformers.__version__}")
    pytest.skip(
        f"transformers {transformers.__version__}: these need transformers 5 "
        "(PYTHONPATH=.venv-hf5, requirements-hf5.txt)",
        allow_module_level=True,
    )

STEPS = 3  # the script's --skip-iters 1: step 0 warms up, steps 1 and 2 must compile nothing
# Thunder cache misses at steps 1 and 2 (dyngen hands static graphs to Thunder). DBRX's experts
# (a per-expert loop in transformers 5) break Dynamo's graph inside their `torch.no_grad()`
# block; the piece of the split graph that leaves it (no inputs, `_set_grad_enabled(True)`) is
# cached by Thunder under the grad mode of the call, disabled at step 0 and enabled from step 1:
# one retrace at step 1, the same under stock ThunderFX (thunder.cache_misses of that piece).
THUNDER_MISSES_AFTER_WARM_UP = {"allenai/OLMoE-1B-7B-0924": [0, 0], "Undi95/dbrx-base": [1, 0]}


@pytest.mark.slow
@pytest.mark.parametrize("model", ["allenai/OLMoE-1B-7B-0924", "Undi95/dbrx-base"])
def test_upstream_script_on_transformers_5(model, tmp_path):
    runs = run_upstream(
        tmp_path, model, *("--max-steps", str(STEPS), "--layers", "1", "--seq-length", "32")
    )
    eager, dyn = runs["eager"][0], runs["dyngen"][0]
    assert eager["status"] == dyn["status"] == "ok", (eager["status"], dyn["status"])
    # the children inherited PYTHONPATH: the script ran on transformers 5 too
    assert eager["transformers"].split(".")[0] == dyn["transformers"].split(".")[0] == "5"
    assert len(dyn["steps"]) == len(eager["steps"]) == STEPS
    assert dyn["steps"][0]["dyngen_compiles"] > 0  # the model's graphs went to dyngen
    assert all(s["dyngen_compiles"] == 0 for s in dyn["steps"][1:]), dyn["steps"]
    misses = [s["thunder_cache_misses"] for s in dyn["steps"][1:]]
    assert misses == THUNDER_MISSES_AFTER_WARM_UP[model], dyn["steps"]
    assert all(s["dyngen_fallbacks"] == 0 for s in dyn["steps"]) and not dyn["fallbacks"], dyn[
        "fallbacks"
    ]
    for a, b in zip(dyn["steps"], eager["steps"]):
        assert abs(a["loss"] - b["loss"]) < 1e-3, (dyn["steps"], eager["steps"])
