"""Host overhead of one dyngen graph call, kernels excluded, next to eager PyTorch.

    .venv/bin/python bench/python/host_overhead.py [--tokens 8,64,256] [--graph FILE]

For the seed's graph (the PEFT-LoRA OLMoE expert MLP forward at its real size, exported by the
frontend: tests/python/golden/seed_expert_mlp.ir) and a few token counts, medians per call of:
  (a) python   the frontend's whole call path, `CapiGraphRunner.run(inputs, dry_run=True)`:
               argument packing, dg_prepare, output and workspace allocation with torch, and
               dg_launch_dry_run (binds the symbols, runs the shape program, packs every kernel's
               arguments; everything dg_launch does except launching)
  (b) ctypes   dg_prepare + dg_launch_dry_run alone, called through ctypes with arguments built
               once; "C only" subtracts the cost of two empty ctypes calls (free(NULL))
  (c) eager    the seed module itself (transformers' OlmoeMLP, bf16, with PEFT LoRA r=16 in fp32),
               forward under no_grad on the CPU, and the number of ATen ops it dispatches (each a
               kernel launch on a GPU)
  (d) eager host floor: the same module at hidden 64, ffn 32 with 2 tokens, where the kernels
               cost next to nothing: what eager spends on the host per forward (Python, nn.Module
               and PEFT dispatch, ATen dispatch), the cost (a) replaces
Needs libdyngen.so (the C executor). Times are medians over repeated batches of calls
(--clock wall: time.perf_counter_ns; cpu: time.thread_time_ns); nothing here is asserted. With
build/bench/runtime_bench present, its C++ numbers for the same work (BM_LaunchPrepare,
BM_LaunchPack) are printed too.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "frontends" / "python"), str(REPO / "frontends" / "python" / "tools")]
warnings.filterwarnings("ignore")

import torch  # noqa: E402

import dyngen  # noqa: E402
from dyngen.core import capi as _capi  # noqa: E402
from dyngen.core.ir import GraphBuilder  # noqa: E402
from dyngen.options import set_options  # noqa: E402

SEED_GRAPH = REPO / "tests" / "python" / "golden" / "seed_expert_mlp.ir"


CLOCKS = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}
clock = CLOCKS["wall"]


def per_call_ns(fn, calls: int, repeats: int) -> float:
    """Median over `repeats` batches of the mean time of one call in a batch of `calls`."""
    for _ in range(max(1, calls // 10)):
        fn()
    samples = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(calls):
            fn()
        samples.append((clock() - t0) / calls)
    return statistics.median(samples)


def graph_inputs(graph, n: int) -> list:
    """Inputs for the graph with every symbol bound to n: small random tensors, ints for syms."""
    bind = {s.name: n for s in graph.symbols}
    out = []
    for vid in graph.inputs:
        v = graph.values[vid]
        if v.is_sym:
            out.append(v.sym.evaluate(bind))
        else:
            shape = [d.evaluate(bind) for d in v.type.shape]
            out.append((torch.randn(shape) * 0.05).to(v.type.dtype.torch))
    return out


def describe(exe) -> dict:
    """dg_executable_describe's JSON (kernels, target, ...)."""
    j = ctypes.c_void_p()
    _capi._check(
        exe._lib.dg_executable_describe(exe._exe, ctypes.byref(j)), "dg_executable_describe"
    )
    try:
        return json.loads(ctypes.string_at(j).decode())
    finally:
        exe._lib.dg_free(j)


def c_path(exe, inputs):
    """dg_prepare + dg_launch_dry_run with arguments built once (b)."""
    ins, outs, specs, ws_bytes = exe._prepare(inputs)
    keep = [torch.empty(shape, dtype=dtype) for shape, dtype in specs]
    for k, t in enumerate(keep):
        outs[k].data = t.data_ptr()
    ws = torch.empty(max(1, ws_bytes), dtype=torch.uint8)
    lib, e, n_in, n_out = exe._lib, exe._exe, len(inputs), len(specs)
    ws_size = ctypes.c_size_t()
    ws_ptr = ws.data_ptr()
    prepare, dry = lib.dg_prepare, lib.dg_launch_dry_run
    size_ref = ctypes.byref(ws_size)

    def call():
        if prepare(e, ins, n_in, outs, n_out, size_ref) or dry(e, ins, n_in, outs, n_out, ws_ptr):
            raise RuntimeError(lib.dg_last_error().decode())

    call.keep = (keep, ws)
    return call


class OpCounter(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


def runtime_bench_numbers() -> dict:
    exe = REPO / "build" / "bench" / "runtime_bench"
    if not exe.is_file():
        return {}
    try:
        r = subprocess.run(
            [
                str(exe),
                "--benchmark_filter=BM_Launch",
                "--benchmark_format=json",
                "--benchmark_min_time=0.2",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        rows = json.loads(r.stdout)["benchmarks"]
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return {}
    unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3}
    return {b["name"]: b["real_time"] * unit.get(b.get("time_unit", "ns"), 1e-3) for b in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", default="8,64,256", help="token counts (the symbol's values)")
    ap.add_argument("--graph", default=str(SEED_GRAPH), help="IR text (.ir/.dgir) or graph.fb")
    ap.add_argument("--calls", type=int, default=200, help="calls per timed batch")
    ap.add_argument("--repeats", type=int, default=30, help="timed batches per measure")
    ap.add_argument("--eager-repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the eager module")
    ap.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: perf_counter; cpu: this thread's CPU time (steadier on a busy "
        "machine; the eager module's other threads are not counted)",
    )
    args = ap.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    torch.set_num_threads(args.threads)

    # The C executor on CPU tensors is the emulation target (Note [Executor choice]); nothing is
    # launched here, so this measures the host path a GPU call takes, less the stream lookup.
    set_options(executor="emulate")
    try:
        _capi.load()
    except dyngen.LibraryNotFound as e:
        sys.exit(f"host_overhead.py needs libdyngen.so (the C executor): {e}")
    path = Path(args.graph)
    if path.suffix == ".fb":
        from dyngen.core.capi import core_print

        text, _ = core_print(path.read_bytes())
    else:
        text = path.read_text()
    graph = GraphBuilder.from_text(text)  # parsed and typed by the core
    exe = dyngen.compile_text(text, path.stem)  # dg_graph_load_text -> dg_compile
    module = small = None
    if path.resolve() == SEED_GRAPH.resolve():  # the module the graph was exported from
        from show_graphs import build_expert

        torch.manual_seed(0)
        module = build_expert(2048, 1024, 16, 32).eval()
        small = build_expert(64, 32, 16, 32).eval()

    free_null = exe._lib.dg_free
    empty_us = per_call_ns(lambda: free_null(None), args.calls * 5, args.repeats) / 1e3
    launches_before = _capi.get_stats()["launches"]
    rows = []
    for n in (int(t) for t in args.tokens.split(",")):
        inputs = graph_inputs(graph, n)
        a = per_call_ns(lambda: exe.run(inputs, dry_run=True), args.calls, args.repeats) / 1e3
        b = per_call_ns(c_path(exe, inputs), args.calls, args.repeats) / 1e3
        row = {"tokens": n, "a": a, "b": b, "c_only": max(0.0, b - 2 * empty_us)}
        if module is not None:
            x = torch.randn(n, 2048).to(torch.bfloat16)
            with torch.no_grad():
                counter = OpCounter()
                with counter:
                    module(x)
                row["ops"] = len(counter.ops)
                row["eager"] = per_call_ns(lambda: module(x), 1, args.eager_repeats) / 1e3
        rows.append(row)
    assert _capi.get_stats()["launches"] == launches_before, "a dry run launched kernels"

    d = describe(exe)
    # Tile variants of one GEMM (variant > 0) are alternatives: a call launches one of them.
    sites = sum(1 for k in d["kernels"] if k.get("variant", 0) == 0)
    print(
        f"graph {path.name}: {graph.num_nodes()} IR nodes -> {sites} kernels "
        f"(target {d.get('target')}); torch threads {args.threads}; medians per call, "
        f"{args.clock} clock"
    )
    print(f"an empty ctypes call (free(NULL)) costs {empty_us:.2f} us")
    cols = ["tokens", "(a) python", "(b) ctypes", "C only", "(c) eager", "eager ops", "a/c", "b/c"]
    print(" | ".join(f"{c:>10}" for c in cols))
    print("-" * (13 * len(cols) - 3))
    for r in rows:
        cells = [str(r["tokens"]), f"{r['a']:.1f} us", f"{r['b']:.1f} us", f"{r['c_only']:.1f} us"]
        if "eager" in r:
            cells += [
                f"{r['eager'] / 1e3:.1f} ms",
                str(r["ops"]),
                f"{r['a'] / r['eager']:.3%}",
                f"{r['b'] / r['eager']:.3%}",
            ]
        else:
            cells += ["-"] * 4
        print(" | ".join(f"{c:>10}" for c in cells))
    if small is not None:
        xs = torch.randn(2, 64).to(torch.bfloat16)
        with torch.no_grad():
            floor_us = per_call_ns(lambda: small(xs), 20, args.repeats) / 1e3
        a_med = statistics.median(r["a"] for r in rows)
        print(
            f"(d) eager host floor (same module at hidden 64, ffn 32, 2 tokens): "
            f"{floor_us:.0f} us per forward; (a) is {a_med / floor_us:.1%} of it"
        )
    cxx = runtime_bench_numbers()
    if cxx:
        print(
            "C++ build/bench/runtime_bench (sm_90a plan, s=512): "
            + ", ".join(f"{k} {v:.2f} us" for k, v in sorted(cxx.items()))
        )


if __name__ == "__main__":
    main()
