"""bench/gpu/grouped_bench.py on the CPU (--device cpu --scale tiny): the three ways of running a
MoE block (dyngen grouped, the model's loop, torch._grouped_mm) run, agree with the loop within
bf16 rounding on the tokens a router tie does not send elsewhere, and write their JSON; bad
arguments are refused. The timings on the CPU mean nothing; the GPU run is the benchmark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu" / "grouped_bench.py"
sys.path.insert(0, str(SCRIPT.parent))

import grouped_bench as gb  # noqa: E402


def test_defaults_cover_the_issue_grid():
    a = gb.parse_args([])
    assert a.models == ["olmoe", "phimoe", "dbrx"]
    assert a.tokens == [512, 1024, 2048, 4096, 8192]
    assert a.ways == ["dyngen", "loop", "grouped_mm"]


@pytest.mark.parametrize(
    "argv", [["--models", "mixtral"], ["--ways", "inductor"], ["--tokens", "1"], ["--reps", "0"]]
)
def test_bad_arguments_are_refused(argv):
    with pytest.raises(SystemExit) as e:
        gb.parse_args(argv)
    assert e.value.code == 2


def test_olmoe_block_three_ways_on_the_cpu(tmp_path):
    out = tmp_path / "grouped.json"
    argv = ["--device", "cpu", "--scale", "tiny", "--models", "olmoe", "--tokens", "16,40"]
    r = subprocess.run(
        [sys.executable, str(SCRIPT), *argv, "--reps", "1", "--warmup", "0", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["failures"] == []
    assert [p["tokens"] for p in report["points"]] == [16, 40]
    for p in report["points"]:
        assert set(p["ms"]) == {"dyngen", "loop", "grouped_mm"}, p
        for way in ("dyngen", "grouped_mm"):
            n = p["numerics"][way]
            # bf16 outputs; a router tie moves at most a token or two (Note [Top-k ties])
            assert n["out"] < 2e-2 and n["dx"] < 2e-2 and n["tokens_off"] <= 2, (way, p)
