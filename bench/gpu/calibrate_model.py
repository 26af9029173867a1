#!/usr/bin/env python
"""Calibration of the performance model: each dyngen kernel's measured device time beside the
estimate of `dyngen plan`, per graph, token count and kernel.

    python bench/gpu/calibrate_model.py --out DIR                          # on a CUDA GPU
    python bench/gpu/calibrate_model.py --join DIR/measured.json --out DIR  # the table, anywhere

The graphs are the expert MLPs of check_numerics.py (olmoe: the seed's graph, phimoe: Phi-3.5-MoE,
dbrx), forward and backward, compiled as kernel_bench.py compiles them (torch.compile with
dyngen.aot.backend, dynamic=True). Two halves, separate so that the second runs without a GPU:

measure (GPU): every CompiledGraph call is wrapped: it writes the graph it runs as
  DIR/graphs/<stem>.fb (stem: counters.dump_stem, as DYNGEN_DUMP names it), records the symbol
  values it binds, and opens a profiler range `dyngen::<stem>`. Per token count: --warmup steps,
  --reps steps timed with CUDA events around each graph call, --reps steps under torch.profiler
  (CUDA activities). Each kernel of the Chrome trace belongs to the graph whose range holds its
  launch (the cuLaunchKernel event with the same correlation id), else the graph whose GPU-side
  range holds the kernel. DIR/measured.json is saved after each point.
join (CPU, calibration_join.py): `dyngen plan <stem>.fb --bind SYM=N ... --gpu h200 --baseline
  eager --json` per graph and binding, its kernels matched by name with the profiled ones. Per
  kernel: the median over calls of its device time in one call, the estimate, the estimate less
  the plan's fixed launch cost (bounds.launch_seconds), both ratios, the limiter. Profiled
  kernels without a plan kernel are listed (`unmatched`), as are launched plan kernels never
  profiled (`missing`); nothing is dropped. DIR/calibration.json and DIR/calibration.md.
Exit status: 0 done, 1 a point or plan failed, 2 bad arguments or no CUDA GPU (measuring).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

from calibration_join import calibrate, find_cli, format_markdown  # noqa: E402
from kernel_bench import EXPERTS, parse_expert_and_token_lists  # noqa: E402 - shared shapes

TOKENS = [64, 512, 1024, 4096]
RANGE_PREFIX = "dyngen::"
SMALL = {"olmoe": (64, 32, 16), "phimoe": (64, 96, 16), "dbrx": (96, 160, 0)}  # --small: CPU


# ---- measure: the GPU half -----------------------------------------------------------------------
class GraphCalls:
    """Wraps CompiledGraph.__call__ (every dyngen graph call): names the call with a profiler
    range, writes the graph once, keeps the symbols it binds and, while `events` is a list, a CUDA
    event pair around the call."""

    def __init__(self, graph_dir: Path, timer):
        self.graph_dir = graph_dir
        self.timer = timer  # make_timer's (begin, end, ms)
        self.graphs: dict[str, dict] = {}  # stem -> {"name", "fb"}
        self.bindings: dict[str, dict] = {}  # stem -> the symbols of its latest call
        self.events: list | None = None  # (stem, event pair) while timing

    def install(self) -> None:
        import torch

        from dyngen.compiled import CompiledGraph

        original, calls = CompiledGraph.__call__, self

        def call(graph, *args):
            stem = calls.register(graph, args)
            with torch.profiler.record_function(RANGE_PREFIX + stem):
                if calls.events is None:
                    return original(graph, *args)
                begin, end, _ = calls.timer
                token = begin()
                out = original(graph, *args)
                calls.events.append((stem, end(token)))
                return out

        CompiledGraph.__call__ = call

    def register(self, graph, args) -> str:
        from dyngen.counters import dump_stem

        stem = graph.__dict__.get("_calibration_stem")
        if stem is None:
            stem = dump_stem(graph.name, graph.exported.text)
            graph._calibration_stem = stem
            self.graph_dir.mkdir(parents=True, exist_ok=True)
            (self.graph_dir / f"{stem}.dgir").write_text(graph.exported.text)
            fb = self.graph_dir / f"{stem}.fb"
            if graph.exported.graph.outputs:
                fb.write_bytes(graph.exported.fb)
            self.graphs[stem] = {"name": graph.name, "fb": fb.name}
        ex = graph.exported
        ins = [
            args[spec.index] if spec.kind == "placeholder" else spec.tensor for spec in ex.inputs
        ]
        ins = [x if hasattr(x, "shape") else int(x) for x in ins]
        self.bindings[stem] = ex.graph.bind_symbols(ins)
        return stem


def make_timer(device):
    """(begin() -> token, end(token) -> pair, ms(pair)): CUDA events on a GPU, else the CPU clock.
    ms() is read after a synchronize."""
    import torch

    if device.type == "cuda":

        def begin():
            a = torch.cuda.Event(enable_timing=True)
            a.record()
            return a

        def end(a):
            b = torch.cuda.Event(enable_timing=True)
            b.record()
            return (a, b)

        return begin, end, lambda pair: pair[0].elapsed_time(pair[1])
    now = time.perf_counter
    return now, lambda t0: (t0, now()), lambda pair: (pair[1] - pair[0]) * 1e3


def kernel_records(trace: dict) -> list[dict]:
    """The device kernels of a Chrome trace (torch.profiler's export), each with the dyngen graph
    call it belongs to: {"graph": stem or None, "call": range key or None, "name", "us"}. A kernel
    belongs to the `dyngen::` range on the CPU that holds its launch (same correlation id), else to
    the `dyngen::` range on the GPU that holds the kernel itself, else to none."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    cpu_ranges, gpu_ranges, launches, kernels = [], [], {}, []
    for e in events:
        cat, name, args = e.get("cat", ""), e.get("name", ""), e.get("args") or {}
        if name.startswith(RANGE_PREFIX) and cat in ("user_annotation", "gpu_user_annotation"):
            ranges = cpu_ranges if cat == "user_annotation" else gpu_ranges
            ranges.append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), name))
        elif cat == "kernel":
            kernels.append(e)
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            launches[args["correlation"]] = float(e["ts"])

    def holder(ranges, t0, t1, kind):
        for i, (a, b, name) in enumerate(ranges):
            if a <= t0 and t1 <= b:
                return name[len(RANGE_PREFIX) :], f"{kind}{i}"
        return None, None

    out = []
    for k in kernels:
        ts, dur = float(k["ts"]), float(k.get("dur", 0))
        launch = launches.get((k.get("args") or {}).get("correlation"))
        graph, call = (None, None)
        if launch is not None:
            graph, call = holder(cpu_ranges, launch, launch, "cpu")
        if graph is None:
            graph, call = holder(gpu_ranges, ts, ts + dur, "gpu")
        out.append({"graph": graph, "call": call, "name": k["name"], "us": dur})
    return out


def measure(args, device_name: str = "cuda", on_progress=None) -> dict:
    """The GPU half: every expert at every token count; returns what measured.json holds."""
    import torch

    sys.path.insert(0, str(REPO / "frontends" / "python"))
    from check_numerics import build  # the experts
    from kernel_bench import make_backend

    import dyngen

    device = torch.device(device_name)
    out_dir = Path(args.out)
    calls = GraphCalls(out_dir / "graphs", make_timer(device))
    calls.install()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    report = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "executor": dyngen.executor_kind(),
        "timing": "CUDA events" if device.type == "cuda" else "CPU clock",
        "reps": args.reps,
        "warmup": args.warmup,
        "graphs": calls.graphs,
        "points": [],
        "failures": [],
    }
    t_start = time.perf_counter()
    for kind in args.experts:
        hidden, ffn, _rank = (SMALL if args.small else EXPERTS)[kind]
        try:
            torch._dynamo.reset()
            fn = make_backend("dyngen", build, kind, hidden, ffn, device)
            g = torch.Generator().manual_seed(0)
            for s in args.tokens:
                if args.time_limit and time.perf_counter() - t_start > args.time_limit:
                    report["failures"].append(f"{kind}: time limit before s={s}")
                    break
                x = torch.randn(s, hidden, generator=g).to(device, torch.bfloat16)
                gout = torch.randn(s, hidden, generator=g).to(device, torch.bfloat16)

                def step(fn=fn, x=x, gout=gout):
                    fn(x.detach().requires_grad_(True)).backward(gout)

                for _ in range(args.warmup):
                    step()
                sync()
                begin, end, ms = calls.timer
                calls.events, steps = [], []
                for _ in range(args.reps):
                    token = begin()
                    step()
                    steps.append(end(token))
                sync()
                call_ms: dict[str, list] = {}
                for stem, pair in calls.events:
                    call_ms.setdefault(stem, []).append(ms(pair))
                calls.events = None
                with torch.profiler.profile(activities=activities) as prof:
                    for _ in range(args.reps):
                        step()
                    sync()
                trace_path = out_dir / "trace.json"
                prof.export_chrome_trace(str(trace_path))
                records = kernel_records(json.loads(trace_path.read_text()))
                trace_path.unlink()
                report["points"].append(
                    {
                        "expert": kind,
                        "hidden": hidden,
                        "ffn": ffn,
                        "tokens": s,
                        "step_ms": statistics.median(ms(p) for p in steps),
                        "graph_call_ms": {k: statistics.median(v) for k, v in call_ms.items()},
                        "bindings": {k: dict(calls.bindings[k]) for k in call_ms},
                        "records": records,
                    }
                )
                print(f"[calibration] {kind} s={s}: {len(records)} kernels profiled", flush=True)
                if on_progress:
                    on_progress(report)  # a phase timeout then keeps what was measured
            del fn
        except Exception as e:  # noqa: BLE001 - record it and go on with the next expert
            report["failures"].append(f"{kind}: {type(e).__name__}: {e}"[:500])
            report.setdefault("tracebacks", []).append(traceback.format_exc()[-2000:])
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if on_progress:
            on_progress(report)  # the failures
    return report


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--experts", default=",".join(EXPERTS), help=f"comma list of {', '.join(EXPERTS)}"
    )
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="comma list of s")
    ap.add_argument("--reps", type=int, default=5, help="timed and profiled steps per point")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per point")
    ap.add_argument("--time-limit", type=float, default=0, help="seconds; no new point after this")
    ap.add_argument("--out", default="calibration", help="folder for every output")
    ap.add_argument("--dyngen-cli", default=None, help="the dyngen CLI (for `dyngen plan`)")
    ap.add_argument("--jobs", type=int, default=8, help="`dyngen plan` processes at once")
    ap.add_argument("--join", default=None, help="measured.json: plan and join only (no GPU)")
    ap.add_argument("--device", default="cuda", help="cuda; cpu with --small is a smoke run")
    ap.add_argument("--small", action="store_true", help="tiny experts (a CPU smoke run)")
    args = ap.parse_args(argv)
    parse_expert_and_token_lists(ap, args, min_tokens=2)
    if args.reps < 1 or args.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.join:
        measured = json.loads(Path(args.join).read_text())
        graph_dir = Path(args.join).parent / "graphs"
    else:
        import torch

        if args.device == "cuda" and not torch.cuda.is_available():
            print(
                "calibrate_model.py: no CUDA GPU here; it profiles GPU kernels. Join a recorded "
                "measurement with --join DIR/measured.json.",
                file=sys.stderr,
            )
            return 2

        def save(report):
            (out / "measured.json").write_text(json.dumps(report, indent=2) + "\n")

        measured = measure(args, args.device, on_progress=save)
        save(measured)
        graph_dir = out / "graphs"
    cli = find_cli(args.dyngen_cli)
    report = calibrate(measured, graph_dir, cli, args.jobs)
    (out / "calibration.json").write_text(json.dumps(report, indent=2) + "\n")
    md = format_markdown(report)
    (out / "calibration.md").write_text(md)
    print(md)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
