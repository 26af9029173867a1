"""The grouped MoE layer's `dyngen plan` at the seed's sizes, beside eager's 64-expert loop and
beside the same layer run eagerly with `torch._grouped_mm`.

    .venv/bin/python bench/python/grouped_layer_plan.py [--tokens 4096] [--export] [--json OUT]

The graphs are OLMoE's MoE block (E = 64 experts, top-8, H = 2048, F = 1024, PEFT LoRA r = 16 on
every expert linear and on the router) under `moe="grouped"`, forward and backward as AOTAutograd
partitions them: tests/fixtures/olmoe_grouped_lora_layer{,_backward}.dgir. `--export` rebuilds
them from the model (a one-layer OLMoE at full size on the CPU, about 1.5 GB, run at 16 tokens
with DYNGEN_DUMP set; the graphs are symbolic in the token count).

Three figures per routing, all ESTIMATES from the same model (Note [Achievable estimate], Note
[Eager baseline]):
  dyngen grouped   `dyngen plan` of the two graphs at T tokens;
  eager grouped    the same graphs run eagerly, one ATen call per op, the grouped GEMMs at
                   cuBLAS's efficiency (torch._grouped_mm's, as transformers 5 runs its experts)
                   and LoRA as eager ops;
  eager loop       transformers 4.57's loop: per expert the seed's expert graphs
                   (seed_expert_mlp{,_backward}.dgir) at that expert's token count, plus the
                   `torch.where` that finds its tokens, a device-to-host sync each time (ASSUMED
                   SYNC_SECONDS; the host waits for the queue to drain there, so experts do not
                   overlap), and the routing, gather and index_add_ ops (ROUTING_CALLS dispatches).
Routings: balanced (T*8/64 rows per expert) and skewed (every token on the same 8 experts; the
other 56 run the loop's ops on no rows, modelled at one token).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
FORWARD = FIXTURES / "olmoe_grouped_lora_layer.dgir"
BACKWARD = FIXTURES / "olmoe_grouped_lora_layer_backward.dgir"
EXPERTS, TOP_K = 64, 8
# An ASSUMED device-to-host sync per torch.where (nonzero's count read): a small cudaMemcpy's
# round trip on an idle queue is of the order of 10 us.
SYNC_SECONDS = 10e-6
# Per expert, outside the expert MLP: where (nonzero), the index of its rows, the gather, the
# routing-weight multiply and index_add_ (transformers 4.57's OlmoeSparseMoeBlock loop).
ROUTING_CALLS = 6
DISPATCH_SECONDS = 5e-6  # runtime/model/eager_baseline.h's kEagerDispatchSeconds


def export_fixtures() -> None:
    """Dumps the grouped block's forward and backward graphs (Note [Grouped experts semantics])
    and writes them as the two fixtures, with a header saying where they come from."""
    sys.path[:0] = [str(REPO / "frontends" / "python"), str(REPO / "bench" / "moe_peft")]
    dump = Path(tempfile.mkdtemp(prefix="grouped-layer-"))
    os.environ.update(DYNGEN_DUMP=str(dump), DYNGEN_EXECUTOR="reference")
    import models
    import torch

    import dyngen.aot
    from dyngen.moe.adapters import GroupedRoute

    built = models.build("allenai/OLMoE-1B-7B-0924", scale="full", num_layers=1)
    GroupedRoute(built.model)
    block = next(m for n, m in built.model.named_modules() if n.endswith("layers.0.mlp"))
    compiled = torch.compile(block, backend=dyngen.aot.backend, dynamic=True)
    for tokens in (16, 24):  # the second call checks that the graphs took the token count free
        x = torch.randn(1, tokens, 2048, dtype=torch.bfloat16, requires_grad=True)
        out, _ = compiled(x)
        out.float().square().sum().backward()
    texts = sorted(dump.glob("*.dgir"))  # counters.dump's <graph>.<part>-<hash>.dgir
    forward = [t for t in texts if ".forward-" in t.name]
    backward = [t for t in texts if ".backward-" in t.name]
    if len(forward) != 1 or len(backward) != 1:
        raise SystemExit(f"expected one forward and one backward graph, got {texts}")
    header = (
        "# OLMoE's MoE block (E = 64, top-8, H = 2048, F = 1024, PEFT LoRA r = 16 on the router\n"
        "# and every expert linear) under dyngen.thunderfx's moe='grouped', {} as AOTAutograd\n"
        "# partitions it. Written by bench/python/grouped_layer_plan.py --export.\n"
    )
    FORWARD.write_text(header.format("forward") + forward[0].read_text())
    BACKWARD.write_text(header.format("backward") + backward[0].read_text())


def token_symbol(graph: Path) -> str:
    for line in graph.read_text().splitlines():
        if line.startswith("sym "):
            return line.split()[1]
    raise ValueError(f"{graph}: no symbol")


def plan(dyngen: str, graph: Path, tokens: int) -> dict:
    """(dyngen's estimate, eager's estimate) in seconds, and the launches."""
    cmd = [dyngen, "plan", str(graph), "--bind", f"{token_symbol(graph)}={tokens}"]
    cmd += ["--gpu", "h200", "--baseline", "eager", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{' '.join(cmd)}: {out.stderr.strip()}")
    p = json.loads(out.stdout)
    return {
        "dyngen": p["total"]["estimated_seconds"],
        "eager": p["baseline"]["estimated_seconds"],
        "launches": p["total"]["launches"],
    }


def expert_loop(dyngen: str, rows_per_expert: list[int]) -> float:
    """Eager's 64-expert loop, forward and backward, for the given rows of each expert."""
    memo: dict[int, float] = {}
    total = 0.0
    for rows in rows_per_expert:
        if rows not in memo:
            t = max(rows, 2)  # the fixtures' token symbol starts at 2; an empty expert ~ 2 rows
            fwd = plan(dyngen, FIXTURES / "seed_expert_mlp.dgir", t)["eager"]
            bwd = plan(dyngen, FIXTURES / "seed_expert_mlp_backward.dgir", t)["eager"]
            memo[rows] = fwd + bwd
        # forward and backward each pass the loop's routing ops; the forward syncs once
        total += memo[rows] + SYNC_SECONDS + 2 * ROUTING_CALLS * DISPATCH_SECONDS
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--dyngen", default=str(REPO / "build" / "dyngen"))
    ap.add_argument("--export", action="store_true", help="rebuild the two fixtures first")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if args.export or not (FORWARD.exists() and BACKWARD.exists()):
        export_fixtures()
    t = args.tokens
    fwd, bwd = plan(args.dyngen, FORWARD, t), plan(args.dyngen, BACKWARD, t)
    grouped = {k: fwd[k] + bwd[k] for k in ("dyngen", "eager", "launches")}
    routed = t * TOP_K
    routings = {
        "balanced": [routed // EXPERTS] * EXPERTS,
        "skewed": [t] * TOP_K + [0] * (EXPERTS - TOP_K),
    }
    rows = []
    for name, per_expert in routings.items():
        loop = expert_loop(args.dyngen, per_expert)
        rows.append(
            {
                "routing": name,
                "tokens": t,
                "dyngen_grouped_us": grouped["dyngen"] * 1e6,
                "eager_grouped_us": grouped["eager"] * 1e6,
                "eager_loop_us": loop * 1e6,
                "vs_loop": grouped["dyngen"] / loop,
                "vs_grouped_mm": grouped["dyngen"] / grouped["eager"],
                "launches": grouped["launches"],
            }
        )
    print(f"OLMoE MoE layer, forward+backward, T = {t}, H200 (ESTIMATES, Note [Eager baseline])")
    print(
        f"{'routing':9} {'dyngen grouped':>15} {'eager grouped':>14} {'eager loop':>11} "
        f"{'x loop':>7} {'x grouped_mm':>13} {'launches':>9}"
    )
    for r in rows:
        print(
            f"{r['routing']:9} {r['dyngen_grouped_us']:13.1f}us {r['eager_grouped_us']:12.1f}us "
            f"{r['eager_loop_us']:9.1f}us {r['vs_loop']:7.3f} {r['vs_grouped_mm']:13.3f} "
            f"{r['launches']:9d}"
        )
    print(
        "The grouped graphs' kernels do not depend on the routing (a worst-case grid over the "
        "device offsets), so their estimate is one figure."
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
