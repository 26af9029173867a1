"""bench/python/compare_plans.py: two plans of one graph matched kernel by kernel, and the run
over real `dyngen plan` output when the CLI is built."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "python"))

import compare_plans as cp  # noqa: E402


def fake_plan(kernels, eager_us):
    total = sum(us for _, us, launched in kernels if launched)
    return {
        "kernels": [
            {"name": n, "estimated_seconds": us * 1e-6, "launched": launched}
            for n, us, launched in kernels
        ],
        "total": {
            "launches": sum(1 for k in kernels if k[2]),
            "estimated_seconds": total * 1e-6,
        },
        "baseline": {"estimated_seconds": eager_us * 1e-6},
        "ratio": total / eager_us,
    }


def test_kernels_matched_by_name_and_one_sided_ones_kept():
    old = fake_plan(
        [("k0", 5.0, True), ("k1", 4.0, True), ("k2", 9.0, True), ("k9", 1.0, False)], 100
    )
    new = fake_plan([("k0", 6.0, True), ("k2", 8.0, True), ("k3", 2.0, True)], 100)
    c = cp.compare(old, new)
    rows = {r["kernel"]: (r["old_us"], r["new_us"]) for r in c["kernels"]}
    assert rows["k0"] == pytest.approx((5.0, 6.0))
    assert rows["k1"] == (pytest.approx(4.0), None)  # gone in the new plan
    assert rows["k3"] == (None, pytest.approx(2.0))  # new
    assert "k9" not in rows  # not launched at this binding
    assert c["total"]["old"]["launches"] == 3 and c["total"]["new"]["launches"] == 3
    assert c["total"]["old"]["ratio"] == pytest.approx(0.18)
    table = cp.format_table("g", 512, c)
    assert "k1" in table and "-" in table and "ratio 0.160" in table


def test_real_plans_of_one_binary_agree_with_themselves(tmp_path):
    lib = os.environ.get("DYNGEN_LIB")
    cli = Path(lib).parent / "dyngen" if lib else REPO / "build" / "dyngen"
    if not cli.exists():
        pytest.skip(f"no dyngen CLI at {cli}")
    out = tmp_path / "cmp.json"
    rc = cp.main(
        [
            str(cli),
            str(cli),
            "--tokens",
            "64",
            "--graphs",
            "seed_expert_mlp",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--json",
            str(out),
        ]
    )
    assert rc == 0

    (result,) = json.loads(out.read_text())
    assert result["kernels"], "no launched kernel"
    for r in result["kernels"]:
        assert r["old_us"] == pytest.approx(r["new_us"])
    assert result["total"]["old"]["ratio"] == pytest.approx(result["total"]["new"]["ratio"])
