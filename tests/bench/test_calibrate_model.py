"""bench/gpu/calibrate_model.py and calibration_join.py, the parts that need no GPU: kernels of a
profiler trace given to the graph call that launched them, profiled names matched with a real
`dyngen plan --json`, ratios, unmatched and missing kernels, the table, and the exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu" / "calibrate_model.py"
sys.path.insert(0, str(SCRIPT.parent))

import calibrate_model as cm  # noqa: E402
import calibration_join as cj  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "seed_expert_mlp.dgir"
STEM = "graph0.forward-0123456789ab"


def cli_path() -> Path:
    lib = os.environ.get("DYNGEN_LIB")
    return Path(lib).parent / "dyngen" if lib else REPO / "build" / "dyngen"


@pytest.fixture(scope="module")
def seed_plan(tmp_path_factory):
    """The seed forward's plan at s77 = 512, from the real CLI."""
    cli = cli_path()
    if not cli.exists():
        pytest.skip(f"no dyngen CLI at {cli}")
    plan, error = cj.run_plan(cli, FIXTURE, {"s77": 512})
    assert plan is not None, error
    return plan


def launched(plan) -> list[dict]:
    return [k for k in plan["kernels"] if k["launched"]]


def test_names_match_exactly_without_a_signature_or_by_affix():
    names = ["k0_fused_gemm2", "k0_fused_gemm2_tile32x64", "k1_cast"]
    assert cj.match_name("k0_fused_gemm2_tile32x64", names) == ("k0_fused_gemm2_tile32x64", "exact")
    assert cj.match_name("void k1_cast(float*, long long)", names) == ("k1_cast", "normalized")
    assert cj.match_name("dg::k1_cast", names) == ("k1_cast", "normalized")
    assert cj.match_name("mod3_k1_cast", names) == ("k1_cast", "affix")
    # the longest plan name wins: the tile variant, not its prefix
    assert cj.match_name("k0_fused_gemm2_tile32x64_sm90a", names)[0] == "k0_fused_gemm2_tile32x64"
    assert cj.match_name("k10_cast", names) == (None, "no plan kernel of that name")
    assert cj.match_name("ampere_bf16_gemm", names)[0] is None


def test_measured_kernels_take_the_median_per_call_of_each_kernels_sum():
    records = [
        ("k0_a", 10.0, "c0"),
        ("k0_a", 5.0, "c0"),  # launched twice in one call: 15 us that call
        ("k0_a", 20.0, "c1"),
        ("k0_a", 16.0, "c2"),
        ("k1_b", 3.0, "c0"),
        {"name": "k1_b", "us": 4.0, "call": "c1", "graph": "g"},
    ]
    m = cj.measured_kernels(records)
    assert m["k0_a"]["us"] == pytest.approx(16.0)  # median of 15, 20, 16
    assert m["k0_a"]["calls"] == 3 and m["k0_a"]["launches"] == 1
    assert m["k1_b"]["us"] == pytest.approx(3.5) and m["k1_b"]["calls"] == 2
    # without a call each record is a call of its own
    assert cj.measured_kernels([("k2", 1.0), ("k2", 3.0), ("k2", 9.0)])["k2"]["us"] == 3.0


def test_trace_kernels_go_to_the_graph_call_that_launched_them():
    def x(cat, name, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}

    trace = {
        "traceEvents": [
            x("user_annotation", "dyngen::gA", 100, 50),
            x("user_annotation", "dyngen::gB", 200, 50),
            x("user_annotation", "other range", 300, 50),
            x("gpu_user_annotation", "dyngen::gB", 1000, 100),
            x("cuda_driver", "cuLaunchKernel", 110, 2, correlation=1),
            x("cuda_driver", "cuLaunchKernel", 210, 2, correlation=2),
            x("cuda_runtime", "cudaLaunchKernel", 310, 2, correlation=3),
            x("kernel", "k0_a", 500, 7.5, correlation=1),
            x("kernel", "k0_a", 600, 8.5, correlation=2),
            x("kernel", "elementwise_kernel", 700, 1.0, correlation=3),
            x("kernel", "k1_b", 1010, 4.0, correlation=99),  # its launch is not in the trace
            x("kernel", "k2_c", 2000, 2.0),
            {"ph": "i", "cat": "kernel", "name": "instant", "ts": 1},
        ]
    }
    got = [(r["graph"], r["name"], r["us"]) for r in cm.kernel_records(trace)]
    assert got == [
        ("gA", "k0_a", 7.5),
        ("gB", "k0_a", 8.5),
        (None, "elementwise_kernel", 1.0),
        ("gB", "k1_b", 4.0),  # by the GPU-side range
        (None, "k2_c", 2.0),
    ]
    calls = {r["call"] for r in cm.kernel_records(trace) if r["graph"]}
    assert calls == {"cpu0", "cpu1", "gpu0"}


def test_join_with_a_real_plan_reports_ratios_unmatched_and_missing(seed_plan):
    ran = launched(seed_plan)
    assert len(ran) >= 3
    kept, dropped = ran[:-1], ran[-1]
    records = []
    for call in range(3):
        for i, k in enumerate(kept):
            name = f"void {k['name']}(float*)" if i == 0 else k["name"]
            records.append((name, 10.0 * (i + 1) + call, f"c{call}"))
        records.append(("k99_not_in_the_plan", 2.0, f"c{call}"))
    j = cj.join(cj.measured_kernels(records), seed_plan)
    rows = {r["kernel"]: r for r in j["rows"]}
    assert set(rows) == {k["name"] for k in kept}
    for i, k in enumerate(kept):
        r = rows[k["name"]]
        est = k["estimated_seconds"] * 1e6
        launch = k["bounds"]["launch_seconds"] * 1e6
        assert r["measured_us"] == pytest.approx(10.0 * (i + 1) + 1)  # median of three calls
        assert r["estimated_us"] == pytest.approx(est)
        assert r["estimated_less_launch_us"] == pytest.approx(est - launch)
        assert r["ratio"] == pytest.approx(r["measured_us"] / est)
        assert r["ratio_less_launch"] == pytest.approx(r["measured_us"] / (est - launch))
        assert r["limiter"] == k["limiter"] and r["launched_in_plan"]
    assert rows[kept[0]["name"]]["match"] == "normalized"
    assert [u["kernel"] for u in j["unmatched"]] == ["k99_not_in_the_plan"]
    assert [m["kernel"] for m in j["missing"]] == [dropped["name"]]
    s = j["summary"]
    assert s["estimated_us"] == pytest.approx(sum(k["estimated_seconds"] for k in ran) * 1e6)
    assert s["measured_us"] == pytest.approx(sum(10.0 * (i + 1) + 1 for i in range(len(kept))) + 2)
    assert (s["kernels_matched"], s["kernels_unmatched"], s["kernels_missing"]) == (
        len(kept),
        1,
        1,
    )


def measured_record(tmp_path: Path, bindings: dict, names: list[str]) -> Path:
    """A measured.json as the GPU half writes it, for the seed forward fixture (stem STEM)."""
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    shutil.copy(FIXTURE, graphs / f"{STEM}.dgir")
    records = [
        {"graph": STEM, "call": f"cpu{c}", "name": n, "us": 5.0 + c}
        for c in range(3)
        for n in names
    ] + [{"graph": None, "call": None, "name": "elementwise_kernel", "us": 1.5}]
    measured = {
        "device": "NVIDIA H200",
        "executor": "capi",
        "timing": "CUDA events",
        "graphs": {STEM: {"name": "graph0.forward", "fb": f"{STEM}.dgir"}},
        "points": [
            {
                "expert": "olmoe",
                "tokens": 512,
                "step_ms": 0.5,
                "graph_call_ms": {STEM: 0.2},
                "bindings": {STEM: bindings},
                "records": records,
            }
        ],
        "failures": [],
    }
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(measured))
    return path


def test_join_only_run_writes_the_table(tmp_path, seed_plan):
    names = [k["name"] for k in launched(seed_plan)][1:] + ["k99_not_in_the_plan"]
    path = measured_record(tmp_path, {"s77": 512}, names)
    out = tmp_path / "out"
    rc = cm.main(["--join", str(path), "--out", str(out), "--dyngen-cli", str(cli_path())])
    assert rc == 0
    report = json.loads((out / "calibration.json").read_text())
    (p,) = report["points"]
    assert p["graph"] == "olmoe/forward" and p["graph_call_ms"] == 0.2
    assert len(p["rows"]) == len(names) - 1
    assert [u["kernel"] for u in p["unmatched"]] == ["k99_not_in_the_plan"]
    assert [m["kernel"] for m in p["missing"]] == [launched(seed_plan)[0]["name"]]
    assert report["outside_dyngen"][0]["kernels"] == {"elementwise_kernel": 1.5}
    md = (out / "calibration.md").read_text()
    assert "| olmoe/forward | 512 | " + names[0] in md
    assert "UNMATCHED k99_not_in_the_plan" in md
    assert "MISSING " + launched(seed_plan)[0]["name"] in md
    assert "graph call 200.0 us (CUDA events)" in md and "elementwise_kernel 1.5 us" in md


def test_a_plan_that_fails_is_reported_and_exits_one(tmp_path):
    if not cli_path().exists():
        pytest.skip(f"no dyngen CLI at {cli_path()}")
    path = measured_record(tmp_path, {"no_such_symbol": 512}, ["k0_x"])
    out = tmp_path / "out"
    assert cm.main(["--join", str(path), "--out", str(out), "--dyngen-cli", str(cli_path())]) == 1
    report = json.loads((out / "calibration.json").read_text())
    (p,) = report["points"]
    assert "dyngen plan exit" in p["plan_error"]
    assert [u["kernel"] for u in p["unmatched"]] == ["k0_x"]  # still listed, never dropped
    assert report["failures"] and "PLAN FAILED" in (out / "calibration.md").read_text()


def test_defaults_and_bad_arguments():
    a = cm.parse_args([])
    assert a.experts == ["olmoe", "phimoe", "dbrx"] and a.tokens == [64, 512, 1024, 4096]
    for argv in (["--experts", "mixtral"], ["--tokens", "1"], ["--tokens", "x"], ["--reps", "0"]):
        with pytest.raises(SystemExit) as e:
            cm.parse_args(argv)
        assert e.value.code == 2


def test_without_a_gpu_measuring_fails_clearly(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the calibration would run")
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert "no CUDA GPU" in r.stderr
