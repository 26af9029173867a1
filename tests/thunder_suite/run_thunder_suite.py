#!/usr/bin/env python
"""Thunder's own ThunderFX tests as a regression check for dyngen.

    .venv/bin/python tests/thunder_suite/run_thunder_suite.py [--only dyngen] [-k EXPR]

Runs `thunder/tests/test_dynamo.py` from the installed lightning-thunder wheel (nothing is
fetched) with pytest twice, on its CPU parametrizations (`-k "not cuda"`): once stock, once with
dyngen swapped in for `thunderfx` / `ThunderCompiler` (dyngen_swap.py). It prints both counts and
every test that passes stock but not with dyngen. A test listed in expected_differences.txt (one
that asserts Thunder itself compiled a graph that dyngen now takes) is reported as expected; any
other such test makes the exit status 1.

Each run takes several minutes on a small machine (about 5-10 on 2 cores), so this is a
documented command rather than part of scripts/test.sh; tests/python/test_thunder_suite.py runs a
few of the same tests under the swap in the normal test suite.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CPU_ONLY = "not cuda"


def test_file() -> Path:
    spec = importlib.util.find_spec("thunder")
    if spec is None or spec.origin is None:
        sys.exit("lightning-thunder is not installed in this Python")
    f = Path(spec.origin).parent / "tests" / "test_dynamo.py"
    if not f.exists():
        sys.exit(f"{f} is missing: this lightning-thunder wheel does not ship its tests")
    return f


def start_pytest(kind: str, k_expr: str, out_dir: Path) -> subprocess.Popen:
    """Starts one run; its junit report goes to out_dir/<kind>.xml, its output to <kind>.log."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(test_file()),
        "-k",
        k_expr,
        "-q",
        "-rfE",
        "-p",
        "no:cacheprovider",
        f"--junitxml={out_dir / f'{kind}.xml'}",
    ]
    env = dict(os.environ)
    # Thunder's tests are a user's program: dyngen runs in its default mode there, where a graph
    # it cannot take warns and runs as ATen ops (DYNGEN_STRICT would turn that into an error).
    env.pop("DYNGEN_STRICT", None)
    if kind == "dyngen":
        cmd += ["-p", "dyngen_swap"]
        paths = [str(HERE), str(REPO / "frontends" / "python")]
        env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    log = out_dir / f"{kind}.log"
    print(f"[{kind}] {' '.join(cmd)}  (log: {log})", flush=True)
    return subprocess.Popen(
        cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env, cwd=out_dir
    )


def finish_pytest(kind: str, proc: subprocess.Popen, out_dir: Path) -> dict:
    """{test id: (outcome, first line of the failure)} of one finished run."""
    proc.wait()
    xml = out_dir / f"{kind}.xml"
    if not xml.exists():
        sys.exit(f"[{kind}] pytest wrote no report; see {out_dir / f'{kind}.log'}")
    return parse_junit(xml)


def run_pytest(kind: str, k_expr: str, out_dir: Path) -> dict[str, tuple[str, str]]:
    return finish_pytest(kind, start_pytest(kind, k_expr, out_dir), out_dir)


def parse_junit(xml: Path) -> dict[str, tuple[str, str]]:
    results = {}
    for tc in ET.parse(xml).getroot().iter("testcase"):
        outcome, msg = "passed", ""
        for child in tc:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                msg = (child.get("message") or child.text or "").strip().splitlines()
                msg = msg[0][:300] if msg else ""
        results[tc.get("name")] = (outcome, msg)
    return results


def expected_differences() -> dict[str, str]:
    """expected_differences.txt: `test id | the assertion that expects Thunder's own graph`."""
    out = {}
    for line in (HERE / "expected_differences.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, why = line.partition("|")
            out[name.strip()] = why.strip()
    return out


def counts(results: dict) -> str:
    c = Counter(o for o, _ in results.values())
    return ", ".join(f"{k} {c[k]}" for k in ("passed", "failed", "error", "skipped") if c[k])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-k", default="", help="an extra pytest -k filter (and-ed with the CPU one)")
    p.add_argument("--only", choices=("stock", "dyngen"), help="run one of the two")
    p.add_argument("--out", default=None, help="folder for the logs and junit files")
    args = p.parse_args(argv)
    k_expr = CPU_ONLY + (f" and ({args.k})" if args.k else "")
    out = Path(args.out or tempfile.mkdtemp(prefix="thunder_suite_"))
    out.mkdir(parents=True, exist_ok=True)
    kinds = [kind for kind in ("stock", "dyngen") if args.only in (None, kind)]
    procs = {kind: start_pytest(kind, k_expr, out) for kind in kinds}  # the two run side by side
    runs = {kind: finish_pytest(kind, procs[kind], out) for kind in kinds}
    for kind, r in runs.items():
        print(f"{kind:7s}: {counts(r)} ({len(r)} tests)")
    if len(runs) < 2:
        return 0
    stock, dyn = runs["stock"], runs["dyngen"]
    expected = expected_differences()
    regressions = []
    for name, (outcome, _) in sorted(stock.items()):
        got, msg = dyn.get(name, ("missing", ""))
        if outcome == "passed" and got != "passed":
            tag = "expected" if name in expected else "REGRESSION"
            print(f"  {tag}: {name}: {got}: {msg}")
            if name in expected:
                print(f"      ({expected[name]})")
            else:
                regressions.append(name)
    gained = [
        n for n, (o, _) in dyn.items() if o == "passed" and stock.get(n, ("",))[0] != "passed"
    ]
    for name in gained:
        print(f"  passes only with dyngen: {name} (stock: {stock.get(name, ('missing',))[0]})")
    print(f"regressions: {len(regressions)}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
