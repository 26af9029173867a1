#!/usr/bin/env python
"""dyngen against eager on the seed's expert subgraphs, over many token counts, forward and
backward: the numbers match (bf16 tolerance), nothing compiles after the first symbolic call, and
the time per call for a few token counts.

    python bench/gpu/check_numerics.py --json out.json                 # GPU, published sizes
    python bench/gpu/check_numerics.py --device cpu --small            # a quick run anywhere

Experts (the graphs Dynamo hands to the backend, one per expert call, `s` tokens):
  olmoe  OlmoeMLP 2048 -> 1024 -> 2048 with PEFT LoRA r=16 on gate/up/down (the seed's graph)
  phimoe PhimoeBlockSparseTop2MLP 4096 -> 6400 with LoRA on w1/w3/w2
  dbrx   DbrxExpertGLU 6144 -> 10752, no LoRA, weights passed as slices of the fused w1/v1/w2
Every expert is compiled with torch.compile(dynamic=True, backend=dyngen.aot.backend), so every
call goes to dyngen (no Thunder needed). Exit status 1 when any comparison fails.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
REPO = Path(__file__).resolve().parents[2]
try:
    import dyngen  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "frontends" / "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

TOKENS = [
    2,
    3,
    7,
    16,
    17,
    31,
    63,
    64,
    65,
    127,
    128,
    129,
    255,
    256,
    257,
    500,
    512,
    777,
    1000,
    1024,
    2048,
    4096,
]
TIMED = [64, 512, 1024, 4096]
SIZES = {"olmoe": (2048, 1024), "phimoe": (4096, 6400), "dbrx": (6144, 10752)}
SMALL = {"olmoe": (64, 32), "phimoe": (64, 96), "dbrx": (96, 160)}


def lora(module: nn.Module, targets: list[str]) -> nn.Module:
    from peft import LoraConfig, get_peft_model

    m = get_peft_model(
        module, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=targets)
    )
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    return m


class DbrxExpert(nn.Module):
    """One DBRX expert as the real model calls it: DbrxExpertGLU with slices of fused weights."""

    def __init__(self, hidden: int, ffn: int, experts: int = 2, index: int = 1):
        super().__init__()
        from transformers.models.dbrx.modeling_dbrx import DbrxExpertGLU

        self.mlp = DbrxExpertGLU(hidden, ffn, experts, {"name": "silu"})
        for p in (self.mlp.w1, self.mlp.v1, self.mlp.w2):
            nn.init.normal_(p, std=0.02)
            p.requires_grad_(False)  # LoRA fine-tuning: DBRX's fused experts stay frozen
        self.shape = (experts, ffn, hidden)
        self.index = index
        object.__setattr__(self, "glu", self.mlp)  # check_expert swaps in the compiled one

    def forward(self, x):
        # As DbrxExperts.forward: the slices are taken outside the expert's graph (eagerly, before
        # the expert loop), so the graph receives them as inputs (views with a storage offset).
        w1 = self.mlp.w1.view(*self.shape)[self.index]
        v1 = self.mlp.v1.view(*self.shape)[self.index]
        w2 = self.mlp.w2.view(*self.shape)[self.index]
        return self.glu(x, w1, v1, w2)


def build(kind: str, hidden: int, ffn: int) -> nn.Module:
    torch.manual_seed(0)
    if kind == "olmoe":
        from transformers.models.olmoe.configuration_olmoe import OlmoeConfig
        from transformers.models.olmoe.modeling_olmoe import OlmoeMLP

        m = OlmoeMLP(OlmoeConfig(hidden_size=hidden, intermediate_size=ffn, hidden_act="silu"))
        return lora(m.to(torch.bfloat16), ["gate_proj", "up_proj", "down_proj"])
    if kind == "phimoe":
        from transformers.models.phimoe.configuration_phimoe import PhimoeConfig
        from transformers.models.phimoe.modeling_phimoe import PhimoeBlockSparseTop2MLP

        m = PhimoeBlockSparseTop2MLP(PhimoeConfig(hidden_size=hidden, intermediate_size=ffn))
        return lora(m.to(torch.bfloat16), ["w1", "w2", "w3"])
    return DbrxExpert(hidden, ffn).to(torch.bfloat16)


def compare(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float]:
    got, want = got.detach().float(), want.detach().float()
    scale = want.abs().max().item() + 1e-6
    return (got - want).abs().max().item(), scale


def ok(err: float, scale: float) -> bool:
    return math.isfinite(err) and err <= 2e-2 * scale + 1e-5


def step(fn, x, gout):
    x = x.detach().clone().requires_grad_(True)
    y = fn(x)
    y.backward(gout)
    return y, x.grad


def timed(fn, x, gout, device, reps: int) -> float:
    """Median ms of forward + backward."""
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step(fn, x, gout)
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            step(fn, x, gout)
            times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def check_expert(
    kind: str,
    hidden: int,
    ffn: int,
    tokens: list[int],
    timed_tokens: list[int],
    device: torch.device,
    reps: int,
) -> dict:
    import dyngen
    import dyngen.aot

    torch._dynamo.reset()
    dyngen.reset_stats()
    model = build(kind, hidden, ffn).to(device)
    ref = build(kind, hidden, ffn).to(device)
    ref.load_state_dict(model.state_dict())
    if kind == "dbrx":  # only DbrxExpertGLU is compiled, as in the model (DbrxExpert.forward)
        object.__setattr__(
            model, "glu", torch.compile(model.mlp, backend=dyngen.aot.backend, dynamic=True)
        )
        compiled = model
    else:
        compiled = torch.compile(model, backend=dyngen.aot.backend, dynamic=True)
    out = {"expert": kind, "hidden": hidden, "ffn": ffn, "calls": [], "failures": []}
    after_first = None
    g = torch.Generator().manual_seed(0)
    for n in tokens:
        x = torch.randn(n, hidden, generator=g).to(device, torch.bfloat16)
        gout = torch.randn(n, hidden, generator=g).to(device, torch.bfloat16)
        t0 = time.perf_counter()
        y, gx = step(compiled, x, gout)
        if device.type == "cuda":
            torch.cuda.synchronize()
        first_ms = (time.perf_counter() - t0) * 1000
        y_ref, gx_ref = step(ref, x, gout)
        e_y, s_y = compare(y, y_ref)
        e_g, s_g = compare(gx, gx_ref)
        row = {
            "tokens": n,
            "out_err": e_y,
            "out_scale": s_y,
            "dx_err": e_g,
            "dx_scale": s_g,
            "first_call_ms": round(first_ms, 3),
        }
        for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
            if p.grad is not None:
                e, s = compare(p.grad, q.grad)
                row.setdefault("param_grad_worst", (0.0, 1.0, ""))
                if e / s > row["param_grad_worst"][0] / row["param_grad_worst"][1]:
                    row["param_grad_worst"] = (e, s, name)
                if not ok(e, s):
                    out["failures"].append(f"{n} tokens: grad of {name}: err {e:.3g} scale {s:.3g}")
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        for what, e, s in (("output", e_y, s_y), ("input grad", e_g, s_g)):
            if not ok(e, s):
                out["failures"].append(f"{n} tokens: {what}: err {e:.3g} scale {s:.3g}")
        out["calls"].append(row)
        if after_first is None:
            after_first = dyngen.stats()
    final = dyngen.stats()
    out["stats_after_first_call"] = {
        k: after_first[k] for k in ("graphs_compiled", "nvrtc_compiles")
    }
    out["stats"] = final
    out["compiles_after_first_call"] = final["graphs_compiled"] - after_first["graphs_compiled"]
    if out["compiles_after_first_call"]:
        out["failures"].append(f"{out['compiles_after_first_call']} compiles after the first call")
    if final["fallbacks"]:
        out["failures"].append(f"fallbacks: {final['fallbacks']}")
    out["timing_ms"] = []
    for n in timed_tokens:
        x = torch.randn(n, hidden, generator=g).to(device, torch.bfloat16)
        gout = torch.randn(n, hidden, generator=g).to(device, torch.bfloat16)
        step(compiled, x, gout), step(ref, x, gout)  # warm
        d = timed(compiled, x, gout, device, reps)
        e = timed(ref, x, gout, device, reps)
        # forward: 3 GEMMs; backward: 3 input-gradient GEMMs (base weights are frozen); LoRA's
        # rank-16 products are left out
        flops = 2 * n * hidden * ffn * 6
        out["timing_ms"].append(
            {
                "tokens": n,
                "dyngen": round(d, 4),
                "eager": round(e, 4),
                "dyngen_vs_eager": round(d / e, 3),
                "dyngen_tflops": round(flops / (d / 1e3) / 1e12, 2),
            }
        )
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--small", action="store_true", help="tiny sizes (CPU smoke test)")
    ap.add_argument("--experts", default="olmoe,phimoe,dbrx")
    ap.add_argument("--tokens", default=None, help="comma list (default: 2..4096, 22 counts)")
    ap.add_argument("--timed", default=None, help="comma list of token counts to time")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    tokens = (
        [int(t) for t in args.tokens.split(",")]
        if args.tokens
        else (TOKENS if not args.small else [2, 3, 17, 64, 129])
    )
    timed_tokens = (
        [int(t) for t in args.timed.split(",")]
        if args.timed is not None
        else (TIMED if not args.small else [64])
    )
    import dyngen

    report = {"device": str(device), "executor": dyngen.executor_kind(), "experts": []}
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(device)
    failed = False
    for kind in args.experts.split(","):
        hidden, ffn = (SMALL if args.small else SIZES)[kind]
        t0 = time.perf_counter()
        try:
            r = check_expert(
                kind, hidden, ffn, tokens, [t for t in timed_tokens if t], device, args.reps
            )
        except Exception as e:  # noqa: BLE001 - report and go on with the next expert
            r = {
                "expert": kind,
                "failures": [f"{type(e).__name__}: {e}"],
                "traceback": traceback.format_exc()[-3000:],
            }
        r["wall_s"] = round(time.perf_counter() - t0, 2)
        report["experts"].append(r)
        failed |= bool(r["failures"])
        status = "ok" if not r["failures"] else "FAILED: " + "; ".join(r["failures"][:3])
        print(
            f"[numerics] {kind} {hidden}x{ffn}: {len(r.get('calls', []))} token counts, "
            f"compiles after first call: {r.get('compiles_after_first_call')}, {status} "
            f"({r['wall_s']} s)",
            flush=True,
        )
        for t in r.get("timing_ms", []):
            print(
                f"[numerics]   s={t['tokens']:5d}  dyngen {t['dyngen']:.3f} ms  eager "
                f"{t['eager']:.3f} ms  ratio {t['dyngen_vs_eager']:.2f}  "
                f"({t['dyngen_tflops']} TFLOP/s)",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
