#!/usr/bin/env python
"""Kernel benchmark: the expert MLP forward + backward, dyngen against eager PyTorch and
torch.compile(dynamic=True) (Inductor), timed with CUDA events, at OLMoE, Phi-3.5-MoE and DBRX
shapes for s in {64, 256, 512, 1024, 2048, 4096} tokens.

    python bench/gpu/kernel_bench.py --json out.json    # on a CUDA GPU
    python bench/gpu/kernel_bench.py --dry-run          # shapes and FLOPs only, any machine

Each point is the median of --reps forward + backward calls (after --warmup calls), each call
timed with a pair of CUDA events. Printed per point: milliseconds per backend, dyngen's time
ratios (eager / dyngen and inductor / dyngen: above 1 means dyngen is faster) and the achieved
TFLOP/s of each backend over the model FLOPs (flops_fwd_bwd). The experts are those of
check_numerics.py; dyngen runs through torch.compile(backend=dyngen.aot.backend, dynamic=True).
Backend dyngen_mma_sync is dyngen with wgmma disabled as well (DYNGEN_DISABLE_PASSES plus wgmma):
on an H200 its GEMMs run the mma.sync kernels in place of wgmma, and the table's mma/wg column is
its time over dyngen's. Every other backend keeps DYNGEN_DISABLE_PASSES as given.
Exit status: 0 done, 2 bad arguments or no CUDA GPU (without --dry-run), 1 a backend failed.
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

EXPERTS = {  # name: (hidden, ffn, LoRA rank or 0)
    "olmoe": (2048, 1024, 16),
    "phimoe": (4096, 6400, 16),
    "dbrx": (6144, 10752, 0),
}
TOKENS = [64, 256, 512, 1024, 2048, 4096]
BACKENDS = ["dyngen", "eager", "inductor", "dyngen_mma_sync"]


def flops_fwd_bwd(hidden: int, ffn: int, rank: int, tokens: int) -> dict:
    """Model FLOPs of one forward + backward (GEMMs only: 2 per multiply-add).

    Forward: gate, up (hidden -> ffn) and down (ffn -> hidden) base GEMMs; with LoRA each also
    runs x.A^T (rank r) and (xA^T).B^T. Backward: the base weights are frozen, so only the input
    gradient of each base GEMM (one GEMM each); each LoRA product needs its input gradient and its
    weight gradient (two GEMMs each, so twice its forward FLOPs). Elementwise work is left out.
    """
    s = tokens
    base = 3 * 2 * s * hidden * ffn
    lora = 0
    if rank:
        # gate and up: hidden -> r -> ffn; down: ffn -> r -> hidden
        lora = 2 * (2 * s * hidden * rank + 2 * s * rank * ffn) + (
            2 * s * ffn * rank + 2 * s * rank * hidden
        )
    forward = base + lora
    backward = base + 2 * lora
    return {"forward": forward, "backward": backward, "total": forward + backward}


def parse_expert_and_token_lists(ap, args, min_tokens: int) -> None:
    """Turns args.experts and args.tokens, comma lists, into lists; ap.error on a bad entry."""
    args.experts = [e for e in args.experts.split(",") if e]
    bad = [e for e in args.experts if e not in EXPERTS]
    if bad or not args.experts:
        ap.error(f"unknown expert(s) {bad}; known: {', '.join(EXPERTS)}")
    try:
        args.tokens = [int(t) for t in args.tokens.split(",") if t]
    except ValueError:
        ap.error(f"--tokens needs a comma list of integers, got {args.tokens!r}")
    if not args.tokens or min(args.tokens) < min_tokens:
        if min_tokens == 1:
            ap.error("--tokens needs positive token counts")
        ap.error(
            f"--tokens needs token counts of at least {min_tokens} (Dynamo specializes 0 and 1)"
        )


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--experts", default=",".join(EXPERTS), help=f"comma list of {', '.join(EXPERTS)}"
    )
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="comma list of s")
    ap.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help=f"comma list of {', '.join(BACKENDS)} (dyngen first is the baseline)",
    )
    ap.add_argument("--reps", type=int, default=10, help="timed calls per point (median)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed calls per point")
    ap.add_argument(
        "--time-limit",
        type=float,
        default=0,
        help="seconds; stop starting new points after this (0: none)",
    )
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--dry-run", action="store_true", help="print shapes and FLOPs; time nothing")
    args = ap.parse_args(argv)
    parse_expert_and_token_lists(ap, args, min_tokens=1)
    args.backends = [b for b in args.backends.split(",") if b]
    bad = [b for b in args.backends if b not in BACKENDS]
    if bad or not args.backends:
        ap.error(f"unknown backend(s) {bad}; known: {', '.join(BACKENDS)}")
    if args.reps < 1 or args.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    return args


def make_backend(name: str, build, kind: str, hidden: int, ffn: int, device):
    """The module each backend runs, built from the same seed so the weights match."""
    import torch

    model = build(kind, hidden, ffn).to(device)
    if name == "eager":
        return model
    if name == "inductor":
        compile_ = lambda m: torch.compile(m, dynamic=True)  # noqa: E731
    else:
        import dyngen.aot

        compile_ = lambda m: torch.compile(m, backend=dyngen.aot.backend, dynamic=True)  # noqa: E731
    if kind == "dbrx":  # only DbrxExpertGLU is compiled, as in the model (check_numerics.py)
        object.__setattr__(model, "glu", compile_(model.mlp))
        return model
    return compile_(model)


def median_cuda_ms(call, reps: int, warmup: int) -> float:
    """Median milliseconds of call(), a pair of CUDA events around each, after `warmup` calls."""
    import torch

    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        call()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def time_point(fn, x, gout, reps: int, warmup: int) -> float:
    """Median milliseconds of one forward + backward, CUDA events around each call."""

    def call():
        xi = x.detach().requires_grad_(True)
        fn(xi).backward(gout)

    return median_cuda_ms(call, reps, warmup)


def run(args, on_progress=None, device_name: str = "cuda") -> dict:
    import torch

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO / "frontends" / "python"))
    from check_numerics import build  # noqa: E402 - the experts, shared with the numerics check

    import dyngen
    from dyngen.options import options, set_options

    device = torch.device(device_name)
    user_disabled = options().disabled_passes
    report = {
        "gpu": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "executor": dyngen.executor_kind(),
        "reps": args.reps,
        "warmup": args.warmup,
        "timing": "median of per-call CUDA-event times, forward + backward",
        "points": [],
        "failures": [],
    }
    t_start = time.perf_counter()
    for kind in args.experts:
        hidden, ffn, rank = EXPERTS[kind]
        g = torch.Generator().manual_seed(0)
        inputs = {
            s: (
                torch.randn(s, hidden, generator=g).to(device, torch.bfloat16),
                torch.randn(s, hidden, generator=g).to(device, torch.bfloat16),
            )
            for s in args.tokens
        }
        times = {s: {} for s in args.tokens}
        for backend in args.backends:
            torch._dynamo.reset()
            if backend == "dyngen_mma_sync":
                set_options(disabled_passes=user_disabled + ("wgmma",))
            t0 = time.perf_counter()
            fn = None
            try:
                fn = make_backend(backend, build, kind, hidden, ffn, device)
                for s in args.tokens:
                    if args.time_limit and time.perf_counter() - t_start > args.time_limit:
                        report["failures"].append(f"{kind}/{backend}: time limit before s={s}")
                        break
                    times[s][backend] = time_point(fn, *inputs[s], args.reps, args.warmup)
            except Exception as e:  # noqa: BLE001 - record it and go on with the next backend
                report["failures"].append(f"{kind}/{backend}: {type(e).__name__}: {e}"[:500])
                report.setdefault("tracebacks", []).append(traceback.format_exc()[-2000:])
            print(
                f"[kernels] {kind} {backend}: {time.perf_counter() - t0:.1f} s (compile and "
                f"timing)",
                flush=True,
            )
            del fn
            set_options(disabled_passes=user_disabled)
            torch.cuda.empty_cache()
        for s in args.tokens:
            flops = flops_fwd_bwd(hidden, ffn, rank, s)["total"]
            row = {
                "expert": kind,
                "hidden": hidden,
                "ffn": ffn,
                "rank": rank,
                "tokens": s,
                "flops_fwd_bwd": flops,
                "ms": times[s],
            }
            row["tflops"] = {b: flops / (ms / 1e3) / 1e12 for b, ms in times[s].items()}
            d = times[s].get("dyngen")
            if d:
                for other in ("eager", "inductor", "dyngen_mma_sync"):
                    if other in times[s]:
                        row[f"{other}_over_dyngen"] = times[s][other] / d
            report["points"].append(row)
        if on_progress:
            on_progress(report)  # a phase timeout then keeps what was measured
    return report


def print_table(report: dict) -> None:
    print(
        f"\nexpert MLP forward+backward on {report['gpu']} ({report['timing']}); ratios are "
        f"other backend's time / dyngen's (> 1: dyngen faster)"
    )
    print(
        f"{'expert':7s} {'s':>5s} {'dyngen ms':>10s} {'eager ms':>9s} {'induct ms':>10s} "
        f"{'eager/dg':>9s} {'ind/dg':>7s} {'mma/wg':>7s} {'dg TF/s':>8s} {'eager TF/s':>10s} "
        f"{'ind TF/s':>9s}"
    )
    for r in report["points"]:
        ms, tf = r["ms"], r["tflops"]

        def f(d, k, fmt):
            return format(d[k], fmt) if k in d else "-"

        print(
            f"{r['expert']:7s} {r['tokens']:5d} {f(ms, 'dyngen', '10.3f'):>10s} "
            f"{f(ms, 'eager', '9.3f'):>9s} {f(ms, 'inductor', '10.3f'):>10s} "
            f"{f(r, 'eager_over_dyngen', '9.2f'):>9s} {f(r, 'inductor_over_dyngen', '7.2f'):>7s} "
            f"{f(r, 'dyngen_mma_sync_over_dyngen', '7.2f'):>7s} "
            f"{f(tf, 'dyngen', '8.1f'):>8s} {f(tf, 'eager', '10.1f'):>10s} "
            f"{f(tf, 'inductor', '9.1f'):>9s}"
        )
    for msg in report["failures"]:
        print(f"FAILED: {msg}")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        for kind in args.experts:
            hidden, ffn, rank = EXPERTS[kind]
            for s in args.tokens:
                f = flops_fwd_bwd(hidden, ffn, rank, s)
                print(
                    f"{kind:7s} hidden {hidden} ffn {ffn} rank {rank} s {s:5d}: "
                    f"{f['forward'] / 1e9:.3f} GFLOP forward, {f['backward'] / 1e9:.3f} backward"
                )
        return 0
    import torch

    if not torch.cuda.is_available():
        print(
            "kernel_bench.py: no CUDA GPU here (torch.cuda.is_available() is False); this "
            "benchmark times GPU kernels only. Use --dry-run for shapes and FLOPs.",
            file=sys.stderr,
        )
        return 2

    def save(report):
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")

    report = run(args, on_progress=save)
    print_table(report)
    save(report)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
