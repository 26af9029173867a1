"""The seed's problem and its fix: the PEFT-LoRA OLMoE expert behind MoE-like routing, called with
many token counts, under stock ThunderFX (one Thunder compile per token count) and under
dyngen.thunderfx (one Thunder compile for Dynamo's first, static call; one dyngen compile of the
symbolic graph, forward and backward, for every later token count)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import check_lora_grads, make, train_loop

import dyngen
import dyngen.thunderfx

HERE = Path(__file__).resolve().parent
# The "Done when": the seed's module at its real size (OLMoE expert hidden 2048, ffn 1024,
# LoRA r=16, alpha=32; bf16 base, fp32 adapters) called with 30 distinct token counts.
HIDDEN, FFN, RANK = 2048, 1024, 16
TOKENS = [
    17,
    5,
    30,
    2,
    23,
    9,
    12,
    31,
    3,
    26,
    14,
    7,
    20,
    28,
    4,
    11,
    25,
    16,
    6,
    29,
    19,
    8,
    13,
    22,
    10,
    27,
    15,
    21,
    18,
    24,
]  # 2..31 in a scrambled order
assert sorted(TOKENS) == list(range(2, 32))


def start_seed_loop(backend: str, tokens, *args, env=None) -> subprocess.Popen:
    """tests/python/seed_loop.py in a process of its own; finish with `seed_loop_result`."""
    cmd = [
        sys.executable,
        str(HERE / "seed_loop.py"),
        "--backend",
        backend,
        "--tokens",
        ",".join(map(str, tokens)),
        *args,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def seed_loop_result(proc: subprocess.Popen, timeout: float = 600) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"seed_loop.py failed ({proc.returncode}):\n{err[-4000:]}"
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_seed_module_30_token_counts_dyngen_vs_stock(fresh):
    """dyngen compiles the dynamic graph once (forward + backward), Thunder compiles only what
    Dynamo's first static call needs, and outputs and gradients (input, every lora_A and lora_B)
    match eager; the same loop under stock ThunderFX compiles once per distinct token count.

    The stock loop runs at the same time in a second process (one torch thread): the two loops
    overlap on 2 cores. Each takes about 2.5 minutes alone there."""
    stock = start_seed_loop(
        "stock",
        TOKENS,
        "--hidden",
        str(HIDDEN),
        "--ffn",
        str(FFN),
        "--rank",
        str(RANK),
        "--threads",
        "1",
    )
    try:
        model, eager = make(HIDDEN, FFN, RANK)
        transforms = []  # Note [Thunder transforms list]: the caller's list must stay untouched
        compiled = dyngen.thunderfx.compile(model, transforms=transforms)
        train_loop(compiled, eager, TOKENS, HIDDEN)
        check_lora_grads(model, eager)
    except BaseException:
        stock.kill()
        stock.communicate()
        raise
    s = dyngen.stats()
    assert s["fallbacks"] == []
    assert s["backend_calls"] == 2  # Dynamo: the first call static, then one symbolic graph
    assert s["static_graphs"] == 1 and s["thunder_cache_misses"] == 1  # Thunder: that first call
    assert s["dynamic_graphs"] == 1
    assert s["exported_graphs"] == 2 and s["graphs_compiled"] == 2  # its forward and backward
    assert [g["kind"] for g in compiled.backend.graphs] == ["thunder", "dyngen"]
    assert transforms == []
    if s["executor"] == "emulate":  # every later token count launched the same two executables
        assert s["launches"] == 2 * (len(TOKENS) - 1)

    result = seed_loop_result(stock)
    # The seed's problem: stock ThunderFX compiles once per distinct token count.
    assert result["thunder_cache_misses"] == len(TOKENS)


def test_dynamic_true_is_symbolic_from_the_first_call(fresh):
    """torch.compile(dynamic=True): no static first graph, so Thunder compiles nothing. (Dynamo
    then also passes PEFT's float scaling as a 0-d tensor read with .item().)"""
    model, eager = make(64, 32, 4)
    compiled = dyngen.thunderfx.compile(model, dynamic=True)
    train_loop(compiled, eager, [5, 9, 12], 64)
    check_lora_grads(model, eager)
    s = dyngen.stats()
    assert (s["static_graphs"], s["dynamic_graphs"], s["thunder_cache_misses"]) == (0, 1, 0)
    assert s["graphs_compiled"] == 2 and s["fallbacks"] == []


@pytest.mark.slow
def test_second_process_uses_the_disk_cache(tmp_path):
    """Two processes run the seed's loop under dyngen.thunderfx with one fresh DYNGEN_CACHE_DIR:
    the first compiles, the second compiles nothing and takes the binaries from the disk."""
    # The generated kernels (host emulation on CPU tensors) are what the disk cache holds.
    env = {**os.environ, "DYNGEN_CACHE_DIR": str(tmp_path / "cache"), "DYNGEN_EXECUTOR": "emulate"}
    first = seed_loop_result(start_seed_loop("dyngen", [5, 9], "--check", env=env))["stats"]
    assert first["executor"] == "emulate"
    second = seed_loop_result(start_seed_loop("dyngen", [5, 9], "--check", env=env))["stats"]
    assert first["nvrtc_compiles"] > 0 and first["cache_hits_disk"] == 0
    assert second["nvrtc_compiles"] == 0 and second["cache_hits_disk"] >= 1
    assert first["graphs_compiled"] == second["graphs_compiled"] == 2
    assert any((tmp_path / "cache").iterdir())
