"""Two `dyngen` binaries' plans side by side: every launched kernel's estimate, per graph and token
count, with the totals and the ratios against eager each binary's model gives.

    python bench/python/compare_plans.py OLD_DYNGEN NEW_DYNGEN [--tokens 512 4096] [--json OUT]

The graphs are the expert fixtures (seed, Phi-3.5-MoE, DBRX) in tests/fixtures. Both binaries
compile and model each graph in the same run, so a change to the kernels or to the model shows
kernel by kernel. The kernels are matched by name; one that only one side launches is listed with
a dash on the other.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
GRAPHS = [
    "seed_expert_mlp",
    "seed_expert_mlp_backward",
    "phi35moe_expert_mlp",
    "phi35moe_expert_mlp_backward",
    "dbrx_expert_backward",
]


def token_symbol(graph: pathlib.Path) -> str:
    """The graph's first symbol, the token count in the expert fixtures (`sym s77 in ...`)."""
    for line in graph.read_text().splitlines():
        if line.startswith("sym "):
            return line.split()[1]
    raise ValueError(f"{graph}: no symbol to bind")


def plan(dyngen: str, graph: pathlib.Path, tokens: int, cache_dir: str | None) -> dict:
    """`dyngen plan --json` of one graph with its token symbol bound, and the eager baseline."""
    bind = f"{token_symbol(graph)}={tokens}"
    cmd = [dyngen, "plan", str(graph), "--bind", bind, "--gpu", "h200"]
    cmd += ["--baseline", "eager", "--json"]
    if cache_dir:
        cmd += ["--cache-dir", cache_dir]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def launched(p: dict) -> dict[str, float]:
    """Kernel name -> estimated microseconds, launched kernels only."""
    return {k["name"]: k["estimated_seconds"] * 1e6 for k in p["kernels"] if k["launched"]}


def compare(old: dict, new: dict) -> dict:
    """The per-kernel rows and the totals of two plans of the same graph and binding."""
    a, b = launched(old), launched(new)
    names = list(a) + [n for n in b if n not in a]
    rows = [{"kernel": n, "old_us": a.get(n), "new_us": b.get(n)} for n in names]
    side = {}
    for label, p in (("old", old), ("new", new)):
        side[label] = {
            "launches": p["total"]["launches"],
            "estimated_us": p["total"]["estimated_seconds"] * 1e6,
            "eager_us": p["baseline"]["estimated_seconds"] * 1e6,
            "ratio": p["ratio"],
        }
    return {"kernels": rows, "total": side}


def format_table(graph: str, tokens: int, c: dict) -> str:
    def us(v):
        return "-" if v is None else f"{v:9.2f}"

    lines = [f"{graph} at {tokens} tokens", f"  {'kernel':40s} {'old us':>9s} {'new us':>9s}"]
    for r in c["kernels"]:
        lines.append(f"  {r['kernel']:40s} {us(r['old_us']):>9s} {us(r['new_us']):>9s}")
    for label in ("old", "new"):
        t = c["total"][label]
        lines.append(
            f"  {label}: {t['launches']} launches, {t['estimated_us']:.2f} us, eager "
            f"{t['eager_us']:.2f} us, ratio {t['ratio']:.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 4096])
    ap.add_argument("--graphs", nargs="+", default=GRAPHS)
    ap.add_argument("--cache-dir", help="the kernel cache both binaries use (default: theirs)")
    ap.add_argument("--json", help="also write every comparison to this file")
    args = ap.parse_args(argv)
    results = []
    for graph in args.graphs:
        path = ROOT / "tests" / "fixtures" / f"{graph}.dgir"
        for tokens in args.tokens:
            c = compare(
                plan(args.old, path, tokens, args.cache_dir),
                plan(args.new, path, tokens, args.cache_dir),
            )
            print(format_table(graph, tokens, c) + "\n")
            results.append({"graph": graph, "tokens": tokens, **c})
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
