"""The four tiny MoE models with PEFT LoRA, trained a few steps with a new sequence length every
step under eager, aot_eager, stock ThunderFX and dyngen.thunderfx.compile (default, and with
moe="loop": the model's own experts code), side by side.

    PYTHONPATH=.venv-hf5 .venv/bin/python bench/python/hf5_runs.py      # transformers 5 + PEFT 0.21
    .venv/bin/python bench/python/hf5_runs.py                          # the pinned generation
        [--models olmoe,phimoe,grin,dbrx] [--backends eager,aot_eager,thunderfx,dyngen,dyngen_loop]
        [--steps 10] [--layers 1] [--dtype bf16] [--json out.json]

Models are built by bench/moe_peft/models.py (tiny scale, LoRA on "all-linear" as PEFT places it,
with that generation's shims). Each (model, backend) runs in its own child process (fresh Dynamo,
Thunder and dyngen state; a crash is a row of the table). Per run:
  loss      max |loss - eager's loss| over the steps both finished
  events    Dynamo compile starts (torch._dynamo.callback.on_compile_start) after the warm-up
            steps (the first static step and the first step with a new length)
  limit     "recompile limit" warnings Dynamo logged (a frame it gave up compiling)
  breaks    Dynamo graph breaks (torch._dynamo.utils.counters["graph_break"], summed)
  fallbacks len(dyngen.stats()["fallbacks"]) and partial: graphs_where["partial"] (dyngen only)
A failure (an exception at some step) is reported with its step and first line, not raised.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "frontends" / "python"), str(REPO / "bench" / "moe_peft")]

SHORT = {
    "olmoe": "allenai/OLMoE-1B-7B-0924",
    "phimoe": "microsoft/Phi-3.5-MoE-instruct",
    "grin": "microsoft/GRIN-MoE",
    "dbrx": "Undi95/dbrx-base",
}
BACKENDS = ("eager", "aot_eager", "thunderfx", "dyngen", "dyngen_loop")
LENGTHS = (20, 27, 14, 33, 18, 25, 30, 12, 23, 16, 29, 21)  # a new length every step
WARMUP = 2


def _compiled(backend: str, model):
    import torch

    if backend == "eager":
        return model
    if backend == "aot_eager":
        return torch.compile(model, backend="aot_eager")
    if backend == "thunderfx":
        from thunder.dynamo import thunderfx

        return thunderfx(model)
    import dyngen.thunderfx

    if backend == "dyngen_loop":  # the model's own experts code, no grouped-experts adapter
        return dyngen.thunderfx.compile(model, moe="loop")
    return dyngen.thunderfx.compile(model)


class _LimitWarnings(logging.Handler):
    """Counts Dynamo's "hit config.recompile_limit" warnings."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record):
        if "recompile_limit" in record.getMessage() or "cache_size_limit" in record.getMessage():
            self.count += 1


def child(model_key: str, backend: str, steps: int, layers: int, dtype_name: str) -> dict:
    warnings.filterwarnings("ignore")
    import models
    import torch
    import torch._dynamo.callback as dynamo_callback

    starts = []
    dynamo_callback.on_compile_start(lambda args: starts.append(args.compile_id))
    limits = _LimitWarnings()
    logging.getLogger("torch._dynamo").addHandler(limits)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
    out = {"model": model_key, "backend": backend, "losses": [], "events": [], "error": None}
    built = models.build(SHORT[model_key], scale="tiny", num_layers=layers, dtype=dtype)
    out["lora"], out["shims"] = built.lora_modules, built.shims
    model = built.model
    try:
        fn = _compiled(backend, model)
    except Exception as e:  # a finding too
        out["error"] = f"compile: {type(e).__name__}: {str(e)[:160]}"
        out["traceback"] = traceback.format_exc()[-3000:]
        return out
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    torch.manual_seed(0)  # the routers' jitter draws from it (PhiMoE)
    for step in range(steps):
        seq = LENGTHS[step % len(LENGTHS)]
        ids = models.batch(step, 1, seq, built.vocab_size, 0, "cpu")
        before = len(starts)
        try:
            loss = fn(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        except Exception as e:  # a finding, reported in the table
            line = (str(e).strip().splitlines() or [""])[0][:160]
            out["error"] = f"step {step}: {type(e).__name__}: {line}"
            out["traceback"] = traceback.format_exc()[-3000:]
            break
        out["losses"].append(float(loss.detach()))
        out["events"].append(len(starts) - before)
    out["limit_warnings"] = limits.count
    out["graph_breaks"] = sum(torch._dynamo.utils.counters["graph_break"].values())
    if backend.startswith("dyngen"):
        import dyngen

        s = dyngen.stats()
        out["fallbacks"] = [str(f)[:200] for f in s["fallbacks"]]
        out["partial"] = s["graphs_where"]["partial"]
        out["moe_blocks"] = s.get("moe_blocks")
    return out


def _run_child(model_key, backend, args) -> dict:
    cmd = [sys.executable, __file__, "--child", model_key, backend, "--steps", str(args.steps)]
    cmd += ["--layers", str(args.layers), "--dtype", args.dtype]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"model": model_key, "backend": backend, "error": f"timeout {args.timeout}s"}
    last = p.stdout.strip().splitlines()[-1:] or [""]
    if p.returncode == 0 and last[0].startswith("{"):
        return json.loads(last[0])
    tail = (p.stderr.strip().splitlines() or ["?"])[-1][:160]
    return {"model": model_key, "backend": backend, "error": f"exit {p.returncode}: {tail}"}


def _row(r: dict, eager: dict | None) -> str:
    losses, ev = r.get("losses", []), r.get("events", [])
    diff = "-"
    if eager and eager.get("losses") and losses and r["backend"] != "eager":
        n = min(len(losses), len(eager["losses"]))
        diff = f"{max(abs(a - b) for a, b in zip(losses[:n], eager['losses'][:n])):.1e}"
    after = sum(ev[WARMUP:]) if len(ev) > WARMUP else "-"
    fb = len(r["fallbacks"]) if "fallbacks" in r else "-"
    cells = [
        r["model"],
        r["backend"],
        f"{len(losses)}",
        diff,
        f"{sum(ev[:WARMUP])}/{after}" if ev else "-",
        str(r.get("limit_warnings", "-")),
        str(r.get("graph_breaks", "-")),
        str(fb),
        str(r.get("partial", "-")),
        (r.get("error") or "ok")[:90],
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--child", nargs=2, metavar=("MODEL", "BACKEND"), help=argparse.SUPPRESS)
    p.add_argument("--models", default=",".join(SHORT))
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--timeout", type=int, default=900, help="seconds per (model, backend)")
    p.add_argument("--json", default=None, metavar="FILE")
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args.steps, args.layers, args.dtype)))
        return 0
    import peft
    import transformers

    print(
        f"transformers {transformers.__version__}, peft {peft.__version__}, {args.dtype}, "
        f"{args.layers} layer(s), {args.steps} steps, lengths {LENGTHS[: args.steps]}, "
        f"DYNGEN_EXECUTOR={os.environ.get('DYNGEN_EXECUTOR', 'default')}",
        flush=True,
    )
    head = "| model | backend | steps | max dloss | events warm-up/after | limit warnings |"
    print(head + " graph breaks | fallbacks | partial | status |")
    print("|" + "---|" * 10, flush=True)
    results = []
    for m in args.models.split(","):
        eager = None
        for b in args.backends.split(","):
            r = _run_child(m, b, args)
            eager = r if b == "eager" else eager
            results.append(r)
            print(_row(r, eager), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
