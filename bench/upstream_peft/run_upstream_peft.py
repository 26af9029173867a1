#!/usr/bin/env python
"""Upstream's own `thunder/benchmarks/benchmark_peft.py` (the seed's script, as installed with
lightning-thunder), run offline at tiny scale under eager, stock ThunderFX and dyngen.

    .venv/bin/python bench/upstream_peft/run_upstream_peft.py [--model all] [--max-steps 4]
    .venv/bin/python bench/upstream_peft/run_upstream_peft.py --nproc-per-node 2 -- --var-seq-length
    PYTHONPATH=.venv-hf5 .venv/bin/python bench/upstream_peft/run_upstream_peft.py  # transformers 5

On transformers 5 + PEFT 0.21 (the children inherit PYTHONPATH) PhiMoE's router is excluded from
LoRA as a user of the script must (hf5_script.py, Note [Upstream benchmark_peft on transformers
5]).

Each (model, backend) runs in a child process that imports the installed script and calls its
`main()` with its own command line (`--compile thunder` for both ThunderFX variants); nothing in
the installed file is edited. The child supplies what the script would fetch or needs a GPU for
(offline.py, Note [Offline pieces]), initialises every parameter (Note [Every parameter
initialised]), seeds torch and `random` with --seed, and for `dyngen` replaces
`thunder.dynamo.thunderfx` with `dyngen.thunderfx.compile`, so the script sets dyngen up exactly as
it sets up ThunderFX (the same Dynamo settings, NvtxProfileTransform, executors). Per step it
records the loss (at `loss.backward()`), Thunder's cache misses, and dyngen's compiles and
fallbacks (at `optimizer.step()`). The parent prints one table per model, eager's losses beside.

With --nproc-per-node N > 1 each child is N processes under `torchrun`, and the script runs its
multi-device mode as written: WORLD_SIZE > 1, so it shards the model with FSDP2 (its
`setup_fsdp2`) and compiles the sharded model; without CUDA its nccl group and CUDA mesh go to
gloo and the CPU (offline.distributed_cpu_redirects). One table per model and rank.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
for p in (HERE, REPO / "bench" / "moe_peft", REPO / "frontends" / "python"):
    sys.path.insert(0, str(p))

MODELS = [
    "allenai/OLMoE-1B-7B-0924",
    "microsoft/Phi-3.5-MoE-instruct",
    "microsoft/GRIN-MoE",
    "Undi95/dbrx-base",
]
BACKENDS = ("eager", "thunder", "dyngen")


class StepLog:
    """Per-step loss and compile counters, filled by the hooks `install_hooks` sets."""

    def __init__(self, backend: str):
        self.backend = backend
        self.steps: list[dict] = []
        self.loss = None
        self.compiled = None  # the ThunderFXCompiledObject the script made
        self.base = self.counters()

    def counters(self) -> dict:
        if self.backend == "dyngen":
            import dyngen

            s = dyngen.stats()
            return {
                "thunder_cache_misses": s["thunder_cache_misses"],
                "dyngen_compiles": s["graphs_compiled"],
                "dyngen_fallbacks": len(s["fallbacks"]),
            }
        misses = 0
        if self.compiled is not None:
            import thunder

            misses = sum(
                thunder.cache_misses(fn)
                for i in self.compiled._backend.subgraph_infos
                for fn in (i.thunder_compiled_fns or [])
            )
        return {"thunder_cache_misses": misses, "dyngen_compiles": 0, "dyngen_fallbacks": 0}

    def end_step(self) -> None:
        now = self.counters()
        self.steps.append(
            {"step": len(self.steps), "loss": self.loss, **{k: now[k] - self.base[k] for k in now}}
        )
        self.base = now


def install_hooks(args, log: StepLog) -> list[str]:
    import random

    import hf5_shims
    import models
    import offline
    import thunder.dynamo
    import torch
    from thunder.benchmarks import benchmark_peft as bp

    notes = offline.cpu_redirects()
    cfg = models.make_config(args.model, "tiny", args.layers, "sdpa")
    bp.AutoConfig = type(
        "LocalConfig",
        (),
        {
            "from_pretrained": staticmethod(
                lambda name, **kw: models.make_config(name, "tiny", args.layers, "sdpa")
            )
        },
    )
    bp.get_tokenizer = lambda name, trust_remote_code=False: offline.WordTokenizer(cfg.vocab_size)

    to_empty = torch.nn.Module.to_empty

    def to_empty_and_init(self, *, device, recurse=True):
        out = to_empty(self, device=device, recurse=recurse)
        offline.initialise(out, args.seed)
        return out

    torch.nn.Module.to_empty = to_empty_and_init
    backward = torch.Tensor.backward

    def recording_backward(self, *a, **k):
        if self.dim() == 0:
            log.loss = float(self.detach())
        return backward(self, *a, **k)

    torch.Tensor.backward = recording_backward

    class RecordingAdamW(torch.optim.AdamW):
        def step(self, *a, **k):
            out = super().step(*a, **k)
            log.end_step()
            return out

    torch.optim.AdamW = RecordingAdamW
    stock = thunder.dynamo.thunderfx

    def thunderfx(model, **kw):
        if args.backend == "dyngen":
            import dyngen.thunderfx

            log.compiled = dyngen.thunderfx.compile(model, **kw)
        else:
            log.compiled = stock(model, **kw)
        return log.compiled

    thunder.dynamo.thunderfx = thunderfx
    if hf5_shims.generation() >= 5:  # Note [Upstream benchmark_peft on transformers 5]
        import hf5_script

        hf5_script.exclude_router_from_lora(bp, notes)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    return notes


def child(args) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import offline
    import torch

    torch.set_num_threads(1)
    note = offline.provide_datasets()  # before the script imports datasets
    # The script makes its process group at import when WORLD_SIZE > 1.
    notes = offline.distributed_cpu_redirects() if world_size() > 1 else []
    from thunder.benchmarks import benchmark_peft as bp

    log = StepLog(args.backend)
    hook_notes = install_hooks(args, log)  # grows while the script runs (hf5_script)
    notes += [note] if note else []
    script_argv = [
        "benchmark_peft.py",
        "--model",
        args.model,
        "--max-steps",
        str(args.max_steps),
        "--skip-iters",
        "1",
        "--seq-length",
        str(args.seq_length),
        "--fixed-num-hidden-layers",
        str(args.layers),
        "--compile",
        "eager" if args.backend == "eager" else "thunder",
    ]
    sys.argv = script_argv + args.script_args
    result = {
        "model": args.model,
        "backend": args.backend,
        "argv": sys.argv,
        "notes": notes,
        "rank": int(os.environ.get("RANK", "0")),
        "world_size": world_size(),
        "transformers": importlib.metadata.version("transformers"),
    }
    try:
        bp.main(bp.parse_args())
        result["status"] = "ok"
    except BaseException as e:  # noqa: BLE001 - recorded in the table
        first_line = (str(e).splitlines() or [""])[0]  # some errors have no message
        result["status"] = f"error: {type(e).__name__}: {first_line[:200]}"
        result["traceback"] = traceback.format_exc()[-3000:]
    result["steps"] = log.steps
    result["notes"] += hook_notes
    if args.backend == "dyngen":
        import dyngen

        s = dyngen.stats()
        result["fallbacks"] = s["fallbacks"]
        result["graphs_where"], result["ops_where"] = s["graphs_where"], s["ops_where"]
    return result


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank_file(out: str | Path, rank: int) -> Path:
    return Path(f"{out}.rank{rank}")


def run_child(args, model: str, backend: str) -> list[dict]:
    """One result per rank (one rank unless --nproc-per-node > 1)."""
    launcher = [sys.executable]
    if args.nproc_per_node > 1:
        port = 29500 + (os.getpid() + len(backend)) % 1000
        launcher += ["-m", "torch.distributed.run", "--nproc_per_node", str(args.nproc_per_node)]
        launcher += ["--master_port", str(port)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        cmd = [
            *launcher,
            __file__,
            "--child",
            "--model",
            model,
            "--backend",
            backend,
            "--max-steps",
            str(args.max_steps),
            "--seq-length",
            str(args.seq_length),
            "--layers",
            str(args.layers),
            "--seed",
            str(args.seed),
            "--out",
            str(out),
            "--",
            *args.script_args,
        ]
        env = dict(os.environ, OMP_NUM_THREADS="1") if args.nproc_per_node > 1 else None
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        results = []
        for rank in range(args.nproc_per_node):
            f = rank_file(out, rank)
            if f.exists():
                results.append(json.loads(f.read_text()))
            else:
                status = f"error: process exit {p.returncode}: {p.stderr.strip()[-300:]}"
                results.append(
                    {"model": model, "backend": backend, "rank": rank, "steps": []}
                    | {"status": status}
                )
        return results


def table(model: str, runs: dict) -> str:
    lines = [
        f"{model}",
        "| step | eager loss | thunder loss | thunder cache misses | dyngen loss "
        "| dyngen compiles | dyngen thunder misses | dyngen fallbacks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    n = max((len(r["steps"]) for r in runs.values()), default=0)

    def cell(kind, i, key, fmt="{}"):
        steps = runs.get(kind, {}).get("steps", [])
        return fmt.format(steps[i][key]) if i < len(steps) and steps[i][key] is not None else "-"

    for i in range(n):
        lines.append(
            f"| {i} | {cell('eager', i, 'loss', '{:.5f}')} | "
            f"{cell('thunder', i, 'loss', '{:.5f}')} | "
            f"{cell('thunder', i, 'thunder_cache_misses')} | "
            f"{cell('dyngen', i, 'loss', '{:.5f}')} | {cell('dyngen', i, 'dyngen_compiles')}"
            f" | {cell('dyngen', i, 'thunder_cache_misses')} | "
            f"{cell('dyngen', i, 'dyngen_fallbacks')} |"
        )
    for kind, r in runs.items():
        lines.append(f"{kind}: {r['status']}")
        for f in r.get("fallbacks", []):
            lines.append(f"  fallback {f['graph']}: {f['reason'].splitlines()[0][:160]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="all", choices=["all"] + MODELS)
    p.add_argument(
        "--compile", default=",".join(BACKENDS), help="comma list of " + ", ".join(BACKENDS)
    )
    p.add_argument("--max-steps", type=int, default=4)
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--nproc-per-node",
        type=int,
        default=1,
        help="run each child under torchrun with this many ranks: the script's FSDP2 mode",
    )
    p.add_argument("--json", default=None)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--backend", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "script_args",
        nargs="*",
        help="after --: more flags for benchmark_peft.py (e.g. --var-seq-length)",
    )
    args = p.parse_args(argv)
    if args.child:
        result = child(args)
        rank_file(args.out, result["rank"]).write_text(json.dumps(result))
        return 0
    models_ = MODELS if args.model == "all" else [args.model]
    backends = [b.strip() for b in args.compile.split(",") if b.strip()]
    results, failed = {}, False
    for m in models_:
        per_rank = {b: run_child(args, m, b) for b in backends}
        results[m] = per_rank
        for rank in range(args.nproc_per_node):
            runs = {b: per_rank[b][rank] for b in backends}
            failed |= any(r["status"] != "ok" for r in runs.values())
            title = m if args.nproc_per_node == 1 else f"{m}, rank {rank}"
            print(table(title, runs), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
