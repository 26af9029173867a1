"""A child process for tests/python/test_cache.py (run with the test's environment).

  cache_child.py model      a small module with a symbolic token count through
                            dyngen.thunderfx.compile(dynamic=True), checked against eager
  cache_child.py dump DIR   every graph.fb in DIR compiled by the core for sm_90a, as a process on
                            an H100/H200 would (this machine has no GPU: compile only)
Prints one JSON line: dyngen.stats() and what the mode found.
"""

import json
import sys
from pathlib import Path

import torch

import dyngen


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(16, 8) / 4)

    def forward(self, x):
        return torch.nn.functional.silu(x @ self.w) * 2.0


def run_model() -> dict:
    import dyngen.thunderfx

    model = Tiny()
    compiled = dyngen.thunderfx.compile(model, dynamic=True)
    with torch.no_grad():
        for n in (3, 5, 9):
            x = torch.randn(n, 16)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    return {}


def run_dump(folder: str) -> dict:
    from dyngen.executors.native import CapiGraphRunner

    hits = {}
    for fb in sorted(Path(folder).glob("*.fb")):
        exe = CapiGraphRunner(fb.read_bytes(), target="sm_90a")
        hits[fb.name] = {"cache_hit": exe.cache_hit, "key": exe.key}
    return {"graphs": hits}


if __name__ == "__main__":
    found = run_model() if sys.argv[1] == "model" else run_dump(sys.argv[2])
    print(
        json.dumps({"stats": dyngen.stats(), **found, "dyngen_file": dyngen.__file__}), flush=True
    )
