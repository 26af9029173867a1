#!/usr/bin/env python
"""LoRA fine-tuning benchmark for the seed's four MoE models under eager, Inductor, stock ThunderFX
and dyngen's ThunderFX backend.

    python bench/moe_peft/benchmark_peft.py --model allenai/OLMoE-1B-7B-0924 \
        --attn-implementation sdpa --max-steps 100 --mbs 1 --seq-length 4096 \
        --compile thunder --fixed-num-hidden-layers 2          # the seed's command shape
    python bench/moe_peft/benchmark_peft.py --model allenai/OLMoE-1B-7B-0924 --scale tiny \
        --compile all --max-steps 12 --warmup-steps 2 --json out.json --plot out.png

Each step: random token ids (mbs x seq-length, the same for every backend), causal-LM loss,
backward, AdamW on the LoRA adapters. Per step: device-synchronized time, tokens/s, peak memory and
compile events (metrics.py: Note [Compile events], Note [Compile time], Note [Peak memory]).

Note [Backends]
  eager     the PEFT model itself
  inductor  torch.compile(model) (Inductor; on CPU it needs a C++ compiler, else it is skipped
            with the reason recorded)
  thunder   stock ThunderFX: thunder.dynamo.thunderfx(model)
  dyngen    dyngen.thunderfx.compile(model): static graphs to Thunder, graphs with symbolic
            shapes to dyngen, the MoE blocks' experts grouped (moe="grouped", the default)
  dyngen-loop
            the same with moe="loop": the model's own per-expert loop, one dyngen graph per
            expert, for an A/B run of the grouped experts
Both compiled ThunderFX variants and Inductor use torch.compile's default dynamic-shape policy
(automatic dynamic), as the seed's benchmark does.

Note [Isolation]
With several backends (--compile all or a comma list) each one runs in its own child process of
this script by default (--isolate process): a fresh model, fresh Dynamo/Thunder/dyngen state, a
peak-memory reading of its own, and a backend that crashes the interpreter (a native library
fault) is reported in the table while the others still run. --isolate none runs them one after
another in this process (after torch._dynamo.reset()).

Note [Backend timeout]
--backend-timeout arms SIGALRM around one backend in the process that runs it: when it fires, a
BackendTimeout is raised at the next Python bytecode (a long native call, such as a C++ or NVRTC
compile, finishes first), the backend is marked "error: timeout" and keeps the steps it finished
and the compile events counted so far (events_at_stop). With --isolate process the parent also
kills a child that outlives its timeout by 60 s.

Exit status: 0 when every backend ran (or was skipped with a recorded reason), 2 when any errored
(its error is in the table and the JSON; the others still ran).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import models  # noqa: E402
import report  # noqa: E402

BACKENDS = ("eager", "inductor", "thunder", "dyngen", "dyngen-loop")
DTYPES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "fp32": "float32",
    "float32": "float32",
}


# ---- command line -------------------------------------------------------------------------------


def _backends(value: str) -> list[str]:
    if value == "all":
        return list(BACKENDS)
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [n for n in names if n not in BACKENDS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"--compile takes one of {', '.join(BACKENDS)}, all, or a comma list; got {value!r}"
        )
    return names


def _timeouts(value: str) -> dict:
    """'30' -> {'*': 30.0}; 'eager=12,dyngen=30' -> {'eager': 12.0, 'dyngen': 30.0}."""
    out = {}
    try:
        for part in value.split(","):
            if "=" in part:
                k, v = part.split("=", 1)
                if k.strip() not in BACKENDS:
                    raise ValueError(k)
                out[k.strip()] = float(v)
            elif part.strip():
                out["*"] = float(part)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--backend-timeout: bad value {value!r} ({e})") from e
    return out


def _lengths(value: str) -> list[int]:
    try:
        out = [int(v) for v in value.split(",") if v.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--seq-lengths: {e}") from e
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"--seq-lengths takes positive integers, got {value!r}")
    return out


def seq_length_at(args, step: int) -> int:
    """The sequence length of one step (--seq-lengths cycles; else --seq-length)."""
    return args.seq_lengths[step % len(args.seq_lengths)] if args.seq_lengths else args.seq_length


def timeout_for(args, kind: str) -> float | None:
    t = args.backend_timeout or {}
    return t.get(kind, t.get("*"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", required=True, choices=models.MODEL_NAMES)
    p.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="accepted for the seed's command line; no effect (models are built from "
        "transformers' own classes)",
    )
    p.add_argument("--attn-implementation", choices=("sdpa", "eager"), default="sdpa")
    p.add_argument("--max-steps", type=int, default=10, help="steps in all, warm-up included")
    p.add_argument(
        "--warmup-steps",
        type=int,
        default=2,
        help="first steps left out of the steady-state figures",
    )
    p.add_argument("--mbs", type=int, default=1, help="micro-batch size")
    p.add_argument(
        "--seq-length",
        type=int,
        default=None,
        help="tokens per sequence (default: 4096 at --scale full, 128 at tiny)",
    )
    p.add_argument(
        "--seq-lengths",
        type=_lengths,
        default=None,
        metavar="N,N,...",
        help="a sequence length per step, cycled (e.g. 96,128,112,144: packing-free "
        "fine-tuning, where every step has its own length); overrides "
        "--seq-length, which becomes the largest",
    )
    p.add_argument(
        "--fixed-num-hidden-layers",
        type=int,
        default=None,
        help="number of decoder layers (default: the model's at full, 2 at tiny)",
    )
    p.add_argument(
        "--compile",
        type=_backends,
        default=["eager"],
        dest="backends",
        metavar="{eager,inductor,thunder,dyngen,dyngen-loop,all}",
        help="backend, 'all', or a comma list (see Note [Backends])",
    )
    p.add_argument(
        "--scale",
        choices=("full", "tiny"),
        default="full",
        help="full: published sizes; tiny: same architecture, small sizes "
        "(models.py, Note [Scales])",
    )
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch (default: 1 at --scale tiny on CPU, where tiny ops "
        "only lose to threading overhead; torch's default otherwise)",
    )
    p.add_argument("--json", default=None, metavar="FILE", help="write every figure here")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="step time per step")
    p.add_argument(
        "--isolate",
        choices=("process", "none"),
        default="process",
        help="several backends: one child process each, or all in this process (Note [Isolation])",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="S",
        help="per backend: stop stepping once this many seconds have passed "
        "(the result is marked truncated)",
    )
    p.add_argument(
        "--backend-timeout",
        type=_timeouts,
        default=None,
        metavar="S|NAME=S,...",
        help="stop a backend after this many seconds (one number for all, or per "
        "backend: eager=12,dyngen=30); what it measured so far is kept "
        "(Note [Backend timeout])",
    )
    p.add_argument(
        "--dyngen-executor",
        choices=("auto", "reference", "emulate", "capi"),
        default="auto",
        help="sets DYNGEN_EXECUTOR (auto: generated kernels on CUDA tensors, the "
        "reference executor on CPU ones; emulate: generated kernels under host "
        "emulation on CPU)",
    )
    p.add_argument(
        "--no-model-shims",
        action="store_true",
        help="build the transformers model unchanged (models.py, Note [PhiMoE rotary "
        "seq_len]: PhiMoE then fails under ThunderFX)",
    )
    p.add_argument("--quiet", action="store_true", help="no per-step lines")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    if args.seq_lengths:
        args.seq_length = max(args.seq_lengths)
    if args.seq_length is None:
        args.seq_length = 4096 if args.scale == "full" else 128
    if args.max_steps < 1 or args.warmup_steps < 0 or args.mbs < 1 or args.seq_length < 1:
        p.error("--max-steps, --mbs and --seq-length must be positive, --warmup-steps >= 0")
    if args.warmup_steps >= args.max_steps:
        p.error("--warmup-steps must be smaller than --max-steps (nothing would be measured)")
    return args


# ---- one backend --------------------------------------------------------------------------------


def resolve_device(name: str):
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda: torch sees no CUDA device")
    return torch.device(name)


def setup_torch(args, device) -> None:
    import torch

    threads = args.threads
    if threads is None and device.type == "cpu" and args.scale == "tiny":
        threads = 1
    if threads:
        torch.set_num_threads(threads)


def _import_dyngen():
    try:
        import dyngen  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO / "frontends" / "python"))
    import dyngen
    import dyngen.thunderfx  # noqa: F401

    return dyngen


def inductor_unavailable(device) -> str | None:
    """Why Inductor cannot compile here (None when it can)."""
    if device.type == "cpu":
        cxx = os.environ.get("CXX") or "c++"
        if not shutil.which(cxx) and not shutil.which("g++") and not shutil.which("clang++"):
            return "Inductor on CPU needs a C++ compiler; none found (CXX, c++, g++, clang++)"
    return None


def compile_model(kind: str, model):
    """(callable, handle) for a backend (Note [Backends]); handle feeds the CompileProbe."""
    import torch

    if kind == "eager":
        return model, None
    if kind == "inductor":
        return torch.compile(model), None
    if kind == "thunder":
        from thunder.dynamo import thunderfx

        compiled = thunderfx(model)
        return compiled, compiled
    if kind in ("dyngen", "dyngen-loop"):
        dyngen = _import_dyngen()
        route = "loop" if kind == "dyngen-loop" else "grouped"
        compiled = dyngen.thunderfx.compile(model, moe=route)
        return compiled, compiled
    raise ValueError(kind)


def _say(args, kind, msg) -> None:
    if not args.quiet:
        print(f"[{kind}] {msg}", flush=True)


def run_backend(args, kind: str) -> dict:
    """Builds a fresh model, compiles it with `kind`, trains max-steps steps, and returns every
    figure; an exception becomes status "error" with the partial steps kept."""
    import metrics
    import torch

    result: dict = {"backend": kind, "status": "error", "steps": []}
    t_start = time.perf_counter()
    probe = start = None
    limit = timeout_for(args, kind)
    alarm = _Alarm(limit)
    try:
        alarm.arm()
        device = resolve_device(args.device)
        setup_torch(args, device)
        result["device"] = str(device)
        if kind == "inductor":
            why = inductor_unavailable(device)
            if why:
                return {**result, "status": "skipped", "reason": why}
        torch._dynamo.reset()
        metrics.enable_dynamo_metrics()
        if kind.startswith("dyngen"):
            _import_dyngen().reset_stats()
        dtype = getattr(torch, DTYPES[args.dtype])
        built = models.build(
            args.model,
            scale=args.scale,
            num_layers=_layers(args),
            attn_implementation=args.attn_implementation,
            dtype=dtype,
            device=device,
            seed=args.seed,
            shims=not args.no_model_shims,
        )
        model = built.model
        result["params"] = {
            "trainable": built.trainable,
            "total": built.total,
            "lora_modules": built.lora_modules,
        }
        result["model_shims"] = built.shims
        fn, handle = compile_model(kind, model)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
        probe = metrics.CompileProbe(kind, handle)
        start = probe.snapshot()
        mem = metrics.PeakMemory(device)
        tokens = args.mbs * _mean_length(args)
        torch.manual_seed(args.seed)  # routing/input jitter noise (PhiMoE) draws from it
        _say(
            args,
            kind,
            f"{args.model} ({args.scale}, {_layers(args) or 'all'} layers) on "
            f"{device}, {args.max_steps} steps of {args.mbs}x{_lengths_text(args)} "
            "tokens",
        )
        for step in range(args.max_steps):
            seq = seq_length_at(args, step)
            ids = models.batch(step, args.mbs, seq, built.vocab_size, args.seed, device)
            before = probe.snapshot()
            mem.reset()
            with metrics.Timer(device) as t:
                loss = fn(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            ev = metrics.delta(probe.snapshot(), before)
            rec = {
                "step": step,
                "seq_length": seq,
                "ms": round(t.seconds * 1000, 3),
                "tokens_per_s": round(args.mbs * seq / t.seconds, 1),
                "peak_mem_mib": round(mem.read_mib(), 1),
                "loss": float(loss.detach()),
                "events": ev,
                "compile_events": metrics.event_total(ev),
            }
            result["steps"].append(rec)
            evs = ", ".join(f"{k}={v}" for k, v in ev.items() if v and k != "dynamo_compile_s")
            _say(
                args,
                kind,
                f"step {step:3d} {rec['ms']:10.1f} ms  loss {rec['loss']:.4f}  "
                f"compile events {rec['compile_events']}" + (f" ({evs})" if evs else ""),
            )
            if (
                args.time_budget
                and time.perf_counter() - t_start > args.time_budget
                and step + 1 < args.max_steps
            ):
                result["truncated"] = f"time budget {args.time_budget}s reached after step {step}"
                _say(args, kind, result["truncated"])
                break
        alarm.disarm()
        result["summary"] = metrics.summarize(result["steps"], args.warmup_steps, tokens)
        result["summary"]["peak_mem_method"] = mem.method
        result["recompile_reasons"] = probe.recompile_reasons()
        if kind.startswith("dyngen"):
            result["dyngen_stats"] = _import_dyngen().stats()
            result["dyngen_graphs"] = list(handle.backend.graphs)
        if kind == "thunder":
            result["thunder_graphs"] = len(handle._backend.subgraph_infos)
        result["status"] = "ok"
    except BaseException as e:  # noqa: BLE001 - one backend's failure must not hide the others
        alarm.disarm()
        if isinstance(e, KeyboardInterrupt):
            raise
        result["error"] = error_line(e)
        if alarm.fired:
            result["error"] = (
                f"timeout: stopped after {limit:g} s, {len(result['steps'])} steps "
                f"done (raised as {type(e).__name__})"
            )
        if probe is not None and start is not None:
            with contextlib.suppress(Exception):
                import metrics as m

                result["events_at_stop"] = m.delta(probe.snapshot(), start)
        if kind.startswith("dyngen") and "dyngen" in sys.modules:
            with contextlib.suppress(Exception):
                result["dyngen_stats"] = sys.modules["dyngen"].stats()
        result["traceback"] = traceback.format_exc()[-4000:]
        _say(args, kind, f"FAILED: {result['error']}")
        if result["steps"]:
            with contextlib.suppress(Exception):
                import metrics as m

                result["summary"] = m.summarize(
                    result["steps"], args.warmup_steps, args.mbs * _mean_length(args)
                )
    finally:
        alarm.disarm()
        result["wall_s"] = round(time.perf_counter() - t_start, 2)
        with contextlib.suppress(Exception):
            torch._dynamo.reset()
        gc.collect()
        with contextlib.suppress(Exception):
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    return result


class BackendTimeout(Exception):
    pass


class _Alarm:
    """Note [Backend timeout]: SIGALRM after `seconds` raises BackendTimeout (main thread only)."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.fired = False
        self._old = None

    def _fire(self, signum, frame):
        self.fired = True
        raise BackendTimeout(f"backend timeout ({self.seconds:g} s)")

    def arm(self) -> None:
        import signal
        import threading

        if not self.seconds or threading.current_thread() is not threading.main_thread():
            return
        self._old = signal.signal(signal.SIGALRM, self._fire)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def disarm(self) -> None:
        import signal

        if self._old is None:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._old)
        self._old = None


def error_line(e: BaseException) -> str:
    """One line for the table: the exception's type and the first lines of its message (Dynamo's
    BackendCompilerFailed puts the backend's own error on its second line)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Set TORCHDYNAMO_VERBOSE")]
    return f"{type(e).__name__}: {' '.join(lines[:3])}"[:300]


def _mean_length(args) -> float:
    """Tokens per sequence, averaged over the lengths the steps cycle through."""
    return sum(args.seq_lengths) / len(args.seq_lengths) if args.seq_lengths else args.seq_length


def _lengths_text(args) -> str:
    return (
        "{" + ",".join(map(str, args.seq_lengths)) + "}"
        if args.seq_lengths
        else str(args.seq_length)
    )


def _layers(args):
    if args.fixed_num_hidden_layers is not None:
        return args.fixed_num_hidden_layers
    return 2 if args.scale == "tiny" else None


# ---- several backends ---------------------------------------------------------------------------


def child_argv(args, kind: str, json_path: str) -> list[str]:
    a = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--model",
        args.model,
        "--attn-implementation",
        args.attn_implementation,
        "--max-steps",
        str(args.max_steps),
        "--warmup-steps",
        str(args.warmup_steps),
        "--mbs",
        str(args.mbs),
        "--seq-length",
        str(args.seq_length),
        "--compile",
        kind,
        "--scale",
        args.scale,
        "--device",
        args.device,
        "--dtype",
        args.dtype,
        "--seed",
        str(args.seed),
        "--lr",
        str(args.lr),
        "--json",
        json_path,
        "--isolate",
        "none",
        "--dyngen-executor",
        args.dyngen_executor,
        "--child",
    ]
    if args.no_model_shims:
        a.append("--no-model-shims")
    if args.seq_lengths:
        a += ["--seq-lengths", ",".join(map(str, args.seq_lengths))]
    for flag, v in (
        ("--fixed-num-hidden-layers", args.fixed_num_hidden_layers),
        ("--threads", args.threads),
        ("--time-budget", args.time_budget),
        ("--backend-timeout", timeout_for(args, kind)),
    ):
        if v is not None:
            a += [flag, str(v)]
    if args.quiet:
        a.append("--quiet")
    return a


def run_isolated(args, kind: str) -> dict:
    """One backend in a child process (Note [Isolation])."""
    with tempfile.TemporaryDirectory(prefix="moe_peft_") as tmp:
        out = os.path.join(tmp, "result.json")
        t0 = time.perf_counter()
        try:
            limit = timeout_for(args, kind)
            proc = subprocess.run(
                child_argv(args, kind, out), timeout=limit + 60 if limit else None
            )
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            return {
                "backend": kind,
                "status": "error",
                "steps": [],
                "error": f"timeout: its process was killed after {limit + 60:g} s",
                "wall_s": round(time.perf_counter() - t0, 2),
            }
        if os.path.exists(out):
            payload = json.loads(Path(out).read_text())
            return payload["backends"][kind]
        why = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
        return {
            "backend": kind,
            "status": "error",
            "steps": [],
            "error": f"its process died ({why}) before writing results",
            "wall_s": round(time.perf_counter() - t0, 2),
        }


def environment(args) -> dict:
    import importlib.metadata as md

    import torch

    def ver(name):
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": ver("transformers"),
        "peft": ver("peft"),
        "lightning-thunder": ver("lightning-thunder"),
        "dyngen": ver("dyngen"),
        "torch_threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cuda"] = torch.version.cuda
    return env


def main(argv=None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    child = "--child" in raw
    if child:
        raw.remove("--child")
    args = parse_args(raw)
    if args.dyngen_executor != "auto":
        os.environ["DYNGEN_EXECUTOR"] = args.dyngen_executor
    results: dict = {}
    meta = None
    for kind in args.backends:
        if len(args.backends) > 1 and args.isolate == "process":
            results[kind] = run_isolated(args, kind)
        else:
            results[kind] = run_backend(args, kind)
        if meta is None:
            meta = make_meta(args, raw)
        if args.json:  # after each backend, so a run stopped from outside keeps what it measured
            report.write_json(args.json, {"meta": meta, "backends": results})
    compare_losses(results)
    payload = {"meta": meta, "backends": results}
    if args.json:
        report.write_json(args.json, payload)
    if child:
        return 0
    return print_report(args, results)


def make_meta(args, raw) -> dict:
    return {
        "argv": raw,
        "model": args.model,
        "scale": args.scale,
        "layers": _layers(args),
        "mbs": args.mbs,
        "seq_length": args.seq_length,
        "seq_lengths": args.seq_lengths,
        "max_steps": args.max_steps,
        "warmup_steps": args.warmup_steps,
        "attn_implementation": args.attn_implementation,
        "dtype": args.dtype,
        "seed": args.seed,
        "config": models.config_values(args.model, args.scale, _layers(args)),
        "expert_mlp": models.MODELS[args.model]["expert_mlp"],
        "methods": {
            "compile_events": "metrics.py Note [Compile events]",
            "compile_s": "metrics.py Note [Compile time]",
            "peak_mem": "metrics.py Note [Peak memory]",
        },
        "environment": environment(args),
    }


def compare_losses(results: dict) -> None:
    """Each backend's largest loss difference from eager over the steps both ran (a numerics
    check: same data, same weights; PhiMoE and DBRX draw routing jitter, so theirs differ more)."""
    eager_loss = [s["loss"] for s in results.get("eager", {}).get("steps", [])]
    for kind, r in results.items():
        losses = [s["loss"] for s in r.get("steps", [])]
        n = min(len(losses), len(eager_loss))
        if kind != "eager" and n:
            r["max_abs_loss_diff_vs_eager"] = max(
                abs(a - b) for a, b in zip(losses[:n], eager_loss[:n])
            )


def print_report(args, results: dict) -> int:
    print()
    print(
        f"{args.model}  scale={args.scale}  layers={_layers(args) or 'all'}  "
        f"mbs={args.mbs}  seq={_lengths_text(args)}  steps={args.max_steps} "
        f"(warm-up {args.warmup_steps})  device={results[args.backends[0]].get('device', '?')}"
    )
    print(report.table(results))
    for kind, r in results.items():
        if r.get("status") == "error" and r.get("traceback"):
            print(f"\n[{kind}] error traceback (last lines):")
            print("\n".join(r["traceback"].strip().splitlines()[-8:]))
    if args.plot:
        title = f"{args.model} ({args.scale}), mbs {args.mbs} x seq {_lengths_text(args)}"
        why = report.plot(args.plot, results, title, args.warmup_steps)
        print(f"plot: {args.plot}" if why is None else f"plot not written: {why}")
    if args.json:
        print(f"json: {args.json}")
    return 2 if any(r.get("status") == "error" for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
