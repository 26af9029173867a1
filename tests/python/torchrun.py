"""Runs a rank script under `torchrun --nproc_per_node 2` (gloo) and reads what each rank wrote."""

import json
import os
import subprocess
import sys
from pathlib import Path


def run_two_ranks(script: Path, results_dir: Path, env: dict, timeout: float) -> dict:
    """{rank: the JSON rank<N>.json it wrote into results_dir}; one file per rank, since the two
    ranks' prints can share a line of the common stdout."""
    results_dir.mkdir(exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", **env)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(29500 + os.getpid() % 1000),
            str(script),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    results = {
        r["rank"]: r
        for r in (json.loads(f.read_text()) for f in sorted(results_dir.glob("rank*.json")))
    }
    assert sorted(results) == [0, 1], p.stdout[-2000:]
    return results
