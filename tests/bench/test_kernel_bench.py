"""bench/gpu/kernel_bench.py, the parts that need no GPU: arguments, FLOP counting, the dry run,
and a clear failure without a GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu" / "kernel_bench.py"
sys.path.insert(0, str(SCRIPT.parent))

import kernel_bench as kb  # noqa: E402


def test_flops_olmoe_by_hand():
    # s = 512, hidden 2048, ffn 1024, r 16.
    s, h, f, r = 512, 2048, 1024, 16
    base = 3 * 2 * s * h * f
    lora = 2 * (2 * s * h * r + 2 * s * r * f) + 2 * s * f * r + 2 * s * r * h
    got = kb.flops_fwd_bwd(h, f, r, s)
    assert got["forward"] == base + lora == 6_593_445_888
    assert got["backward"] == base + 2 * lora
    assert got["total"] == 2 * base + 3 * lora


def test_flops_dbrx_without_lora_is_six_gemms():
    got = kb.flops_fwd_bwd(6144, 10752, 0, 4096)
    assert got["forward"] == got["backward"] == 3 * 2 * 4096 * 6144 * 10752
    # linear in s
    assert kb.flops_fwd_bwd(6144, 10752, 0, 2048)["total"] * 2 == got["total"]


def test_defaults_cover_the_issue_grid():
    a = kb.parse_args([])
    assert a.experts == ["olmoe", "phimoe", "dbrx"]
    assert a.tokens == [64, 256, 512, 1024, 2048, 4096]
    assert a.backends == ["dyngen", "eager", "inductor", "dyngen_mma_sync"]
    assert kb.EXPERTS["olmoe"] == (2048, 1024, 16)
    assert kb.EXPERTS["phimoe"] == (4096, 6400, 16)
    assert kb.EXPERTS["dbrx"][:2] == (6144, 10752)


@pytest.mark.parametrize(
    "argv",
    [
        ["--experts", "mixtral"],
        ["--tokens", "64,x"],
        ["--tokens", "0"],
        ["--backends", "tvm"],
        ["--reps", "0"],
        ["--experts", ""],
    ],
)
def test_bad_arguments_exit_two(argv):
    with pytest.raises(SystemExit) as e:
        kb.parse_args(argv)
    assert e.value.code == 2


def test_dry_run_prints_flops():
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--experts", "olmoe", "--tokens", "512"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "olmoe" in r.stdout and "6.593 GFLOP forward" in r.stdout


def test_without_a_gpu_it_fails_clearly():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the benchmark would run")
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--experts", "olmoe", "--tokens", "64"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "no CUDA GPU" in r.stderr


def test_table_shows_the_mma_sync_ratio(capsys):
    """The mma/wg column is dyngen_mma_sync's time over dyngen's (wgmma's gain on an H200)."""
    report = {
        "gpu": "test",
        "timing": "t",
        "failures": [],
        "points": [
            {
                "expert": "olmoe",
                "tokens": 512,
                "ms": {"dyngen": 2.0, "eager": 3.0, "dyngen_mma_sync": 2.5},
                "tflops": {"dyngen": 1.0},
                "eager_over_dyngen": 1.5,
                "dyngen_mma_sync_over_dyngen": 1.25,
            }
        ],
    }
    kb.print_table(report)
    out = capsys.readouterr().out
    assert "mma/wg" in out
    row = [line for line in out.splitlines() if line.startswith("olmoe")][0]
    assert "1.25" in row.split() and "1.50" in row.split()
