"""bench/upstream_peft/run_upstream_peft.py as the upstream-benchmark tests run it: eager beside
dyngen on one model, dyngen's ATen executor and a kernel cache of the test's own; the runs of
that model from the runner's JSON (backend -> one record per rank)."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_upstream(tmp_path: Path, model: str, *args: str) -> dict:
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(REPO / "bench" / "upstream_peft" / "run_upstream_peft.py")]
    cmd += ["--model", model, "--compile", "eager,dyngen", *args, "--json", str(out)]
    env = {"DYNGEN_CACHE_DIR": str(tmp_path / "cache"), "DYNGEN_EXECUTOR": "reference"}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env={**os.environ, **env})
    print(p.stdout[-3000:])
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return json.loads(out.read_text())[model]
