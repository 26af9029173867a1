"""Host time per training step: eager vs dyngen's per-expert route vs dyngen's grouped route, with
the kernel launches made dry runs.

    .venv/bin/python bench/python/host_path.py [--model olmoe] [--layers 1] [--seq 128]
        [--steps 5] [--routes eager,loop,grouped] [--json out.json] [--cprofile FILE]

One training step of a tiny bench/moe_peft model (random weights, PEFT LoRA as the seed places
it): forward, causal-LM loss, backward, AdamW on the adapters. On the CPU with tiny sizes the
compute is next to nothing, so the step's wall time is what the host spends: Python, Dynamo's
guards, AOTAutograd's wrappers, dispatch, dyngen's call path. Per route it prints the median time
of the step's forward+backward (the figure the routes change) with the optimizer's step beside it
(the same for every route; its per-parameter `.item()` reads CPU counters, no device sync), and,
from `torch.profiler` on one forward+backward, the Dynamo cache lookups, `aten::nonzero` and
`aten::_local_scalar_dense` (device-to-host reads on a GPU; `.item()` reads through it), and
dyngen's graph calls per step. Every ratio is against eager measured by the same command.

Note [Replayed dry runs]
A dry run (`dg_launch_dry_run`) does the whole call path but launches nothing, so its outputs are
unwritten; fed on, they would change the routing (zeroed hidden states make every token pick the
same experts, and the per-expert route then makes a fraction of its real graph calls). So each
dyngen route runs its timed steps twice from the same state (the model, the optimizer and the random
generator, which the routers' jitter draws from): first for real (the C executor,
emulated kernels), recording every graph call's outputs; then, from the saved model and optimizer
state, as dry runs whose outputs are copied in from the record. The trajectory is then the real
one (the replayed losses must equal the recorded ones, checked), and the copies' own time is
measured and taken out of the figure (and printed).
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "frontends" / "python"), str(REPO / "bench" / "moe_peft")]
warnings.filterwarnings("ignore")

import torch  # noqa: E402

ROUTES = ("eager", "loop", "grouped")
PROFILED = {
    "TorchDynamo Cache Lookup": "cache_lookups",
    "aten::nonzero": "nonzero",
    "aten::_local_scalar_dense": "local_scalar_dense",
    "aten::item": "item",
}


class Replay:
    """Wraps CapiGraphRunner.run: records the outputs, or dry-runs and copies them in from the
    record (Note [Replayed dry runs])."""

    def __init__(self):
        from dyngen.executors.native import CapiGraphRunner

        self.cls, self.orig = CapiGraphRunner, CapiGraphRunner.run
        self.mode, self.log, self.at, self.calls, self.copy_ns = "real", [], 0, 0, 0
        replay = self

        def run(runner, inputs, *, dry_run=False):
            replay.calls += 1
            if replay.mode == "record":
                outs = replay.orig(runner, inputs)
                replay.log.append([o.detach().clone() for o in outs])
                return outs
            if replay.mode == "replay":
                outs = replay.orig(runner, inputs, dry_run=True)
                t0 = time.perf_counter_ns()
                recorded = replay.log[replay.at]
                replay.at += 1
                for o, r in zip(outs, recorded, strict=True):
                    o.copy_(r)
                replay.copy_ns += time.perf_counter_ns() - t0
                return outs
            return replay.orig(runner, inputs, dry_run=dry_run)

        CapiGraphRunner.run = run


SHORT_NAMES = {"olmoe": "OLMoE", "phimoe": "Phi-3.5", "grin": "GRIN", "dbrx": "dbrx"}


def model_name(short: str) -> str:
    """bench/moe_peft's full name for olmoe/phimoe/grin/dbrx (or a full name as it is)."""
    import models

    key = SHORT_NAMES.get(short.lower(), short)
    found = [n for n in models.MODEL_NAMES if key.lower() in n.lower()]
    if len(found) != 1:
        raise SystemExit(
            f"--model {short}: one of {', '.join(SHORT_NAMES)} or {models.MODEL_NAMES}"
        )
    return found[0]


def build(args):
    import models

    built = models.build(
        model_name(args.model), scale="tiny", num_layers=args.layers, seed=args.seed
    )
    model = built.model
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    return built, model, opt


def make_step(fn, model, opt, ids):
    """(forward+backward, optimizer step): timed apart, the optimizer being the same for every
    route (and its per-parameter `.item()` reads of CPU step counters are no device syncs)."""

    def model_part():
        loss = fn(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach()

    def optimizer_part():
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model_part, optimizer_part


def timed_steps(model_part, optimizer_part, steps: int):
    """Per step: (model ms, optimizer ms, loss)."""
    out = []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        loss = model_part()
        t1 = time.perf_counter_ns()
        optimizer_part()
        t2 = time.perf_counter_ns()
        out.append(((t1 - t0) / 1e6, (t2 - t1) / 1e6, float(loss)))
    return out


def profile_counts(model_part, optimizer_part) -> tuple[dict, float]:
    """The profiled events of one step's forward+backward (the optimizer runs outside the
    profiler), and its loss."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss = model_part()
    optimizer_part()
    counts = dict.fromkeys(PROFILED.values(), 0)
    for e in prof.events():
        key = PROFILED.get(e.name)
        if key:
            counts[key] += 1
    return counts, float(loss)


def run_route(args, route: str) -> dict:
    """One route in this process: warm-up, timed steps, one profiled step."""
    import models

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    built, model, opt = build(args)
    ids = models.batch(0, 1, args.seq, built.vocab_size, args.seed, "cpu")
    out = {"route": route}
    if route == "eager":
        parts = make_step(model, model, opt, ids)
        timed_steps(*parts, args.warmup)
        rows = timed_steps(*parts, args.steps)
        counts, _ = profile_counts(*parts)
        out.update(
            step_ms=statistics.median(r[0] for r in rows),
            optimizer_ms=statistics.median(r[1] for r in rows),
            graph_calls=0,
            **counts,
        )
        return out

    import dyngen
    import dyngen.thunderfx
    from dyngen.options import set_options

    set_options(executor="emulate")  # the C executor: the path a GPU call takes
    replay = Replay()
    fn = dyngen.thunderfx.compile(model, moe=route)
    parts = make_step(fn, model, opt, ids)
    timed_steps(*parts, args.warmup)
    # the generator too: the routers' jitter (DBRX, PhiMoE) must draw the same numbers again
    saved = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))
    rng = torch.get_rng_state()
    replay.mode = "record"
    recorded = [r[2] for r in timed_steps(*parts, args.steps)]
    recorded.append(profile_counts(*parts)[1])
    model.load_state_dict(saved[0])
    opt.load_state_dict(saved[1])
    torch.set_rng_state(rng)
    replay.mode, replay.calls, copies = "replay", 0, []
    rows = []
    profiler = cProfile.Profile() if args.cprofile else None
    for _ in range(args.steps):
        c0 = replay.copy_ns
        if profiler:
            profiler.enable()
        rows += timed_steps(*parts, 1)
        if profiler:
            profiler.disable()
        copies.append((replay.copy_ns - c0) / 1e6)
    if profiler:  # where the host time of the replayed steps goes, for `python -m pstats`
        profiler.dump_stats(f"{args.cprofile}.{route}")
    calls_per_step = replay.calls / args.steps
    counts, last = profile_counts(*parts)
    losses = [r[2] for r in rows] + [last]
    if losses != recorded:
        raise SystemExit(f"{route}: replayed losses {losses} differ from recorded {recorded}")
    s = dyngen.stats()
    if s["fallbacks"]:  # then part of the step was not dyngen's path: the figure would mislead
        raise SystemExit(f"{route}: dyngen fell back: {s['fallbacks']}")
    out.update(
        step_ms=statistics.median(r[0] - c for r, c in zip(rows, copies, strict=True)),
        optimizer_ms=statistics.median(r[1] for r in rows),
        copy_ms=statistics.median(copies),
        graph_calls=calls_per_step,
        grouped=sum(1 for b in s["moe_blocks"].values() if b["route"] == "grouped"),
        **counts,
    )
    return out


def child(args, route: str) -> dict:
    """Each route in a fresh process: Dynamo's and dyngen's state start clean."""
    cmd = [sys.executable, __file__, "--child", route, *sys.argv[1:]]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return {"route": route, "error": (r.stderr or r.stdout).strip().splitlines()[-1:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="olmoe", help="bench/moe_peft model name")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per route")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--routes", default=",".join(ROUTES))
    ap.add_argument("--json", default="")
    ap.add_argument("--cprofile", default="", help="cProfile the replayed steps to FILE.<route>")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_route(args, args.child)))
        return 0
    rows = [child(args, r) for r in args.routes.split(",")]
    eager = next((r["step_ms"] for r in rows if r["route"] == "eager" and "step_ms" in r), None)
    print(
        f"{args.model} tiny, {args.layers} layer(s), seq {args.seq}: host time per training step "
        "(forward+backward; the optimizer's step beside it)"
    )
    print(
        f"{'route':8} {'fwd+bwd ms':>10} {'x eager':>8} {'optimizer ms':>12} {'graph calls':>11} "
        f"{'cache lookups':>13} {'nonzero':>7} {'scalar reads':>12} {'replay copies ms':>16}"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['route']:8} error: {r['error']}")
            continue
        ratio = f"{r['step_ms'] / eager:.3f}" if eager else "-"
        reads = r["local_scalar_dense"]  # aten::item reads through it
        print(
            f"{r['route']:8} {r['step_ms']:10.2f} {ratio:>8} {r['optimizer_ms']:12.2f} "
            f"{r['graph_calls']:11.1f} "
            f"{r['cache_lookups']:13d} {r['nonzero']:7d} {reads:12d} {r.get('copy_ms', 0):16.2f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
