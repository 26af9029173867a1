#!/usr/bin/env python
"""The MoE layer benchmark: one MoE block (the router and every expert, PEFT LoRA r = 16 wherever
bench/moe_peft puts it) forward + backward, three ways, timed with CUDA events, at OLMoE,
Phi-3.5-MoE and DBRX sizes (one layer of bench/moe_peft's model, full scale) for T tokens:

  loop        the model's own expert loop (transformers 4.57), eager PyTorch: per expert a
              torch.where (a device-to-host sync), its rows' MLP and an index_add_
  grouped_mm  dyngen's grouped route (moe/adapters.py: the same router, counting sort, grouped
              GEMMs over every expert and combine) run eagerly, its grouped GEMMs as
              torch._grouped_mm, the way transformers 5 runs fused experts, LoRA included.
              Per-expert weights are stacked once and reused (transformers 5 keeps them fused);
              on CUDA the f32 rank-r products run in bf16, which torch._grouped_mm requires:
              faster and coarser than dyngen's f32, so this baseline is, if anything, favoured
  dyngen      the same grouped route compiled by dyngen (torch.compile with dyngen.aot.backend,
              dynamic=True): one graph per direction for every T

    python bench/gpu/grouped_bench.py --json grouped.json          # on a CUDA GPU
    python bench/gpu/grouped_bench.py --device cpu --scale tiny \\
        --tokens 16,40 --reps 1 --warmup 1                        # a dry run of this script

Each point is the median of --reps calls after --warmup, each call timed by a pair of CUDA events
(wall clock on the CPU). Printed per point: milliseconds per way, loop / dyngen and grouped_mm /
dyngen (above 1: dyngen is faster), and the numerics of dyngen and grouped_mm against the loop
(compare(): max |difference| of the output and of x's gradient over the loop's max |value|, and
the tokens a router tie sends elsewhere).
Exit status: 0 done, 2 bad arguments or no CUDA GPU on --device cuda, 1 a point failed.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MODELS = {  # short name: (bench/moe_peft model, the MoE block's module name suffix)
    "olmoe": ("allenai/OLMoE-1B-7B-0924", ".mlp"),
    "phimoe": ("microsoft/Phi-3.5-MoE-instruct", ".block_sparse_moe"),
    "dbrx": ("Undi95/dbrx-base", ".ffn"),
}
TOKENS = [512, 1024, 2048, 4096, 8192]
WAYS = ["dyngen", "loop", "grouped_mm"]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma list of {', '.join(MODELS)}")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="comma list of T")
    ap.add_argument("--ways", default=",".join(WAYS), help=f"comma list of {', '.join(WAYS)}")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run of the script")
    ap.add_argument("--scale", default="full", choices=["full", "tiny"], help="bench/moe_peft's")
    ap.add_argument("--reps", type=int, default=5, help="timed calls per point (median)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed calls per point")
    ap.add_argument("--time-limit", type=float, default=0, help="seconds; no new model after it")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    args.ways = [w for w in args.ways.split(",") if w]
    try:
        args.tokens = [int(t) for t in args.tokens.split(",") if t]
    except ValueError:
        ap.error(f"--tokens needs a comma list of integers, got {args.tokens!r}")
    bad = [m for m in args.models if m not in MODELS] + [w for w in args.ways if w not in WAYS]
    if bad or not args.models or not args.ways:
        ap.error(f"unknown model(s) or way(s) {bad}; models {list(MODELS)}, ways {WAYS}")
    if not args.tokens or min(args.tokens) < 2:
        ap.error("--tokens needs token counts of at least 2 (Dynamo specializes 0 and 1)")
    if args.reps < 1 or args.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    return args


class TorchGroupedMm:
    """dyngen's grouped ops evaluated with torch._grouped_mm while the context is open (their
    eager bodies, executors/aten_grouped.py, loop over the experts and read offsets on the host).
    """

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.stacks: dict = {}

    def _stack(self, weights, nk: bool):
        """[E, N, K] contiguous, built once per weight list (frozen base weights; the adapters do
        not change during the benchmark)."""
        import torch

        key = (tuple(w.data_ptr() for w in weights), nk)
        if key not in self.stacks:
            w = weights[0] if len(weights) == 1 and weights[0].dim() == 3 else torch.stack(weights)
            w = w if nk else w.transpose(-2, -1)
            self.stacks[key] = w.detach().to(torch.bfloat16 if self.cuda else w.dtype).contiguous()
        return self.stacks[key]

    def grouped_mm(self, a, offs, weights, weights_nk):
        import torch

        w = self._stack(list(weights), weights_nk)
        x = a.to(w.dtype)
        return torch._grouped_mm(x, w.transpose(-2, -1), offs=offs).to(a.dtype)

    def grouped_mm_wgrad(self, g, x, offs):
        import torch

        dt = torch.bfloat16 if self.cuda else g.dtype
        return torch._grouped_mm(g.to(dt).t(), x.to(dt), offs=offs).to(g.dtype)

    @contextlib.contextmanager
    def installed(self):
        import dyngen.executors.aten_grouped as ag

        names = ("grouped_mm", "grouped_mm_wgrad", "_check_index")
        saved = [getattr(ag, n) for n in names]
        ag.grouped_mm, ag.grouped_mm_wgrad = self.grouped_mm, self.grouped_mm_wgrad
        # The routing's range check reads the indices on the host; the router's top-k makes
        # them valid, and transformers 5's grouped_mm path syncs nowhere either.
        ag._check_index = lambda top_k_index, num_experts: top_k_index.reshape(-1).long()
        try:
            yield
        finally:
            for n, f in zip(names, saved):
                setattr(ag, n, f)


def moe_block(model, suffix: str):
    """The model's first MoE block (the router and the experts)."""
    for name, mod in model.named_modules():
        if name.endswith("layers.0" + suffix) or name.endswith("blocks.0" + suffix):
            return mod
    raise LookupError(f"no module named *.0{suffix}")


def timed(fn, reps: int, warmup: int, device) -> float:
    """Median milliseconds of fn() (CUDA events on a GPU, the wall clock on the CPU)."""
    if device.type == "cuda":
        from kernel_bench import median_cuda_ms  # beside this file

        return median_cuda_ms(fn, reps, warmup)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run_model(args, model_key: str, device, report: dict, on_progress) -> None:
    import models
    import torch

    import dyngen.aot
    from dyngen.moe.adapters import GroupedRoute

    name, suffix = MODELS[model_key]
    built = models.build(name, scale=args.scale, num_layers=1, device=device)
    cfg = built.config
    hidden = getattr(cfg, "hidden_size", None) or cfg.d_model
    # Two copies with the same weights: the model's loop, and the grouped route, switched once
    # (switching one model back and forth would make Dynamo recompile the compiled block).
    grouped_model = copy.deepcopy(built.model)
    route = GroupedRoute(grouped_model)
    if not route.grouped:
        raise RuntimeError(f"no MoE block grouped: {route.not_grouped}")
    blocks = {
        "loop": moe_block(built.model, suffix),
        "grouped_mm": moe_block(grouped_model, suffix),
    }
    blocks["dyngen"] = torch.compile(blocks["grouped_mm"], backend=dyngen.aot.backend, dynamic=True)
    eager_grouped = TorchGroupedMm(device)

    def way_fn(way, x, gout):
        def call():
            xi = x.detach().requires_grad_(True)
            torch.manual_seed(0)  # the routers' jitter (Phi, GRIN, DBRX): the same draws each way
            with eager_grouped.installed() if way == "grouped_mm" else contextlib.nullcontext():
                # A copy: DBRX's router jitters its input in place, which a leaf cannot take.
                out = blocks[way](xi.clone())[0]
                out.backward(gout)
            return out.detach(), xi.grad

        return call

    g = torch.Generator(device="cpu").manual_seed(0)
    for tokens in args.tokens:
        x = (torch.randn(1, tokens, hidden, generator=g) * 0.5).to(device, torch.bfloat16)
        gout = (torch.randn(1, tokens, hidden, generator=g) * 0.1).to(device, torch.bfloat16)
        point = {"model": model_key, "tokens": tokens, "ms": {}, "numerics": {}}
        results = {}
        for way in args.ways:
            try:
                fn = way_fn(way, x, gout)
                results[way] = fn()
                point["ms"][way] = timed(fn, args.reps, args.warmup, device)
            except Exception as e:  # noqa: BLE001 - one way's failure must not hide the others
                point.setdefault("errors", {})[way] = f"{type(e).__name__}: {e}"
                report["failures"].append(f"{model_key} T={tokens} {way}: {e}")
                traceback.print_exc()
        ms = point["ms"]
        for way in ("loop", "grouped_mm"):
            if way in ms and "dyngen" in ms:
                point[f"{way}_over_dyngen"] = ms[way] / ms["dyngen"]
        if "loop" in results:
            for way in ("dyngen", "grouped_mm"):
                if way in results:
                    point["numerics"][way] = compare(results[way], results["loop"])
        report["points"].append(point)
        print_point(point)
        on_progress(report)


def compare(got, ref) -> dict:
    """Max |difference| of the output and of x's gradient over the reference's max |value|, over
    the tokens both route alike; `tokens_off`: tokens whose output row is off by more than 5% of
    that max, which a tie between the k-th and (k+1)-th router logits sends to another expert
    (Note [Top-k ties]: dyngen's top-k takes the lower index, PyTorch's either)."""
    (out, dx), (ref_out, ref_dx) = got, ref
    scale_out, scale_dx = ref_out.float().abs().max(), ref_dx.float().abs().max()
    d_out = (out.float() - ref_out.float()).abs().reshape(-1, out.shape[-1]).amax(-1) / scale_out
    d_dx = (dx.float() - ref_dx.float()).abs().reshape(-1, dx.shape[-1]).amax(-1) / scale_dx
    alike = d_out <= 0.05
    return {
        "out": float(d_out[alike].max()) if bool(alike.any()) else float("nan"),
        "dx": float(d_dx[alike].max()) if bool(alike.any()) else float("nan"),
        "tokens_off": int((~alike).sum()),
    }


def print_point(p: dict) -> None:
    ms = "  ".join(f"{w} {v:8.3f} ms" for w, v in p["ms"].items())
    ratios = "  ".join(
        f"{w}/dyngen {p[f'{w}_over_dyngen']:6.2f}"
        for w in ("loop", "grouped_mm")
        if f"{w}_over_dyngen" in p
    )
    num = "  ".join(
        f"{w} out {n['out']:.1e} dx {n['dx']:.1e} off {n['tokens_off']}"
        for w, n in p["numerics"].items()
    )
    print(f"{p['model']:7s} T {p['tokens']:5d}  {ms}  {ratios}  [{num}]", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path[:0] = [str(REPO / "frontends" / "python"), str(REPO / "bench" / "moe_peft")]
    import torch

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            "grouped_bench.py: no CUDA GPU here; --device cpu runs the script on the CPU",
            file=sys.stderr,
        )
        return 2
    report = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "scale": args.scale,
        "points": [],
        "failures": [],
    }

    def save(r):
        if args.json:
            Path(args.json).write_text(json.dumps(r, indent=2) + "\n")

    t0 = time.perf_counter()
    for model_key in args.models:
        if args.time_limit and time.perf_counter() - t0 > args.time_limit:
            report["failures"].append(f"{model_key}: not started, --time-limit reached")
            break
        try:
            run_model(args, model_key, device, report, save)
        except Exception as e:  # noqa: BLE001
            report["failures"].append(f"{model_key}: {type(e).__name__}: {e}")
            traceback.print_exc()
        torch._dynamo.reset()  # the compiled block held its model; the next one starts clean
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    save(report)
    for msg in report["failures"]:
        print(f"FAILED: {msg}")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
