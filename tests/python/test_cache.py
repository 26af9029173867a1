"""The kernel cache from the frontend: prebuilding for GPUs on a CPU machine
(DYNGEN_PREBUILD_ARCHS, the backend option), the cache counters in stats(), the exit summary."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dyngen
from dyngen.executors import runtime
from dyngen.executors.cache import check_archs
from dyngen.report import summary_line

HERE = Path(__file__).resolve().parent
GRAPH = """graph @tiny
sym s0 in [2, inf] div 1
input %x: f32[s0, 8]
%y: f32[s0, 8] = silu(%x)
output %y
"""


def child(mode: str, *args, env: dict) -> dict:
    r = subprocess.run(
        [sys.executable, str(HERE / "cache_child.py"), mode, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return {**json.loads(r.stdout.strip().splitlines()[-1]), "stderr": r.stderr}


def capi_or_skip():
    if runtime.executor_kind() != "capi":
        pytest.skip("libdyngen.so is not built (the ATen executor has no kernel cache)")


def test_prebuild_archs_are_checked():
    assert check_archs("sm_80, sm_90a,sm_80") == ("sm_80", "sm_90a")
    assert check_archs(["host"]) == ("host",)
    for bad in ("sm_9x", "cuda", "80"):
        with pytest.raises(ValueError):
            check_archs(bad)
    import dyngen.thunderfx

    with pytest.raises(ValueError):
        dyngen.thunderfx.backend(prebuild_archs="gfx90a")


def test_prebuild_found_by_a_second_process_for_sm90a(tmp_path):
    """A CPU process runs a dynamic graph through dyngen.thunderfx with
    DYNGEN_PREBUILD_ARCHS=sm_90a; a second process compiling the same graphs for sm_90a (what
    an H200 process does) finds every binary on disk and runs no NVRTC compile."""
    capi_or_skip()
    env = {
        **os.environ,
        "DYNGEN_CACHE_DIR": str(tmp_path / "cache"),
        "DYNGEN_DUMP": str(tmp_path / "dump"),
        "DYNGEN_PREBUILD_ARCHS": "sm_90a",
        "DYNGEN_CACHE_SUMMARY": "1",
    }
    env.pop("DYNGEN_TARGET", None)
    first = child("model", env=env)
    s = first["stats"]
    assert s["executor"] == "emulate" and s["dynamic_graphs"] == 1 and s["fallbacks"] == []
    graphs = s["exported_graphs"]  # graphs_compiled also counts the prebuilds
    c = s["cache"]
    assert c["prebuild_compiled"] == graphs >= 1 and c["prebuild_failed"] == 0
    assert c["compiled"] == 2 * graphs  # the host binary to run, and sm_90a
    summary = [ln for ln in first["stderr"].splitlines() if ln.startswith("dyngen cache:")]
    assert len(summary) == 1 and f"{2 * graphs} compiled" in summary[0], first["stderr"]

    second_env = {
        k: v
        for k, v in env.items()
        if k not in ("DYNGEN_PREBUILD_ARCHS", "DYNGEN_DUMP", "DYNGEN_CACHE_SUMMARY")
    }
    second = child("dump", str(tmp_path / "dump"), env=second_env)
    assert len(second["graphs"]) == graphs
    assert all(g["cache_hit"] == "disk" for g in second["graphs"].values()), second["graphs"]
    assert second["stats"]["nvrtc_compiles"] == 0
    assert second["stats"]["cache"]["from_disk"] == graphs

    # The CLI agrees: the dump folder for sm_90a is entirely cached; stats count it per arch.
    cli = [sys.executable, "-m", "dyngen"]
    r = subprocess.run(
        cli
        + [
            "compile",
            str(tmp_path / "dump"),
            "--arch",
            "sm_90a",
            "--arch",
            "host",
            "--json",
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        env=second_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)["summary"]
    assert (summary["graphs"], summary["compiled"], summary["already_cached"]) == (
        graphs,
        0,
        2 * graphs,
    )
    r = subprocess.run(
        cli + ["cache", "stats", "--json", "--cache-dir", str(tmp_path / "cache")],
        env=second_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    by_arch = json.loads(r.stdout)["by_arch"]
    assert by_arch["sm_90a"]["entries"] == graphs and by_arch["host"]["entries"] == graphs


def test_prebuild_option_and_stats_counters(tmp_path, monkeypatch, fresh):
    """compile_text's prebuild_archs (compile_ir's, which the backend option passes, works
    alike): a miss compiles, a repeat is already cached; stats()["cache"] counts binaries from the
    cache and compiled."""
    capi_or_skip()
    monkeypatch.setenv("DYNGEN_CACHE_DIR", str(tmp_path / "cache"))
    runtime.compile_text(GRAPH, "tiny", prebuild_archs=("sm_80",))
    c = dyngen.stats()["cache"]
    assert (c["prebuild_compiled"], c["prebuild_cached"], c["compiled"]) == (1, 0, 2)
    assert c["folder"] == str(tmp_path / "cache") and c["hit_rate"] == 0.0
    runtime.compile_text(GRAPH, "tiny", prebuild_archs=("sm_80",))
    c = dyngen.stats()["cache"]
    assert (c["prebuild_compiled"], c["prebuild_cached"], c["compiled"]) == (1, 1, 2)
    assert c["from_memory"] == 2 and c["hit_rate"] == 0.5
    assert "2 kernel binaries from the cache" in summary_line()
    names = {p.name for p in (tmp_path / "cache").iterdir()}
    assert len(names) == 2 and all(n.endswith(".dgk") for n in names)
