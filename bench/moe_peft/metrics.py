"""What one training step costs: device-synchronized time, peak memory, and compile events.

Note [Compile events]
Counted as cumulative snapshots taken before and after each step; a step's events are the deltas.
  dynamo_frames         Dynamo frame compiles (torch._dynamo.utils.counters["frames"]["total"]:
                        every compile attempt of a frame, first compiles, recompiles and frames
                        Dynamo gave up on)
  dynamo_recompiles     those frame compiles whose frame had compiled code already (Dynamo's
                        compilation metrics with a recompile_reason)
  dynamo_graphs         FX graphs Dynamo handed to the backend (counters["stats"]["unique_graphs"])
  thunder_cache_misses  Thunder traces compiled: stock ThunderFX, thunder.cache_misses summed over
                        the functions its ThunderCompiler keeps (subgraph_infos); dyngen,
                        dyngen.stats()["thunder_cache_misses"] (the same sum for its static graphs)
  dyngen_graphs         dyngen.stats()["graphs_compiled"] (exported ATen graphs given to the
                        executor, forward and backward apart; cache hits included)
  dyngen_nvrtc          dyngen.stats()["nvrtc_compiles"] (real code generations)
  dyngen_fallbacks      len(dyngen.stats()["fallbacks"]) (graphs dyngen could not take: eager)
A step's compile-event total is dynamo_frames + thunder_cache_misses + dyngen_graphs (each is work
that a steady state must not repeat; dynamo_graphs and dyngen_nvrtc are parts of those).

Note [Compile time]
Thunder compiles lazily, at the first call with a new input shape, so a timer around the
torch.compile backend call misses it. The benchmark therefore reports
    compile_s = sum over steps with compile events of (step time - steady step time)
where the steady step time is the median of the measured (post-warm-up) steps that had no compile
events (all measured steps when every one of them compiled). It includes Dynamo tracing,
AOTAutograd, Inductor/Thunder/dyngen compilation and first-call work (allocator growth, oneDNN
primitive creation). dynamo_compile_s, Dynamo's own per-frame compile time (its compilation
metrics: tracing plus the backend call, so Inductor's compile but not Thunder's lazy one), is
reported beside it.

Note [Peak memory]
CUDA: torch.cuda.max_memory_allocated, reset before each step. CPU: the process's peak resident
set (VmHWM), reset before each step by writing 5 to /proc/self/clear_refs (Linux); where that is
refused, ru_maxrss (a peak over the whole process, marked "ru_maxrss").
"""

from __future__ import annotations

import re
import resource
import statistics
import time

import torch

EVENT_KEYS = (
    "dynamo_frames",
    "dynamo_recompiles",
    "dynamo_graphs",
    "thunder_cache_misses",
    "dyngen_graphs",
    "dyngen_nvrtc",
    "dyngen_fallbacks",
)
TOTAL_KEYS = ("dynamo_frames", "thunder_cache_misses", "dyngen_graphs")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Timer:
    """Wall time of a block, synchronized with the device on both ends."""

    def __init__(self, device: torch.device):
        self.device = device
        self.seconds = 0.0

    def __enter__(self):
        synchronize(self.device)
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._t0
        return False


# ---- peak memory (Note [Peak memory]) -----------------------------------------------------------


def _vm_hwm_kib() -> int | None:
    try:
        with open("/proc/self/status") as f:
            m = re.search(r"VmHWM:\s+(\d+)\s*kB", f.read())
        return int(m.group(1)) if m else None
    except OSError:
        return None


class PeakMemory:
    def __init__(self, device: torch.device):
        self.device = device
        self.method = "cuda.max_memory_allocated" if device.type == "cuda" else "VmHWM"

    def reset(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        if self.method == "VmHWM":
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                self.method = "ru_maxrss"

    def read_mib(self) -> float:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) / 2**20
        kib = _vm_hwm_kib() if self.method == "VmHWM" else None
        if kib is None:
            self.method = "ru_maxrss"
            kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        return kib / 1024


# ---- compile events (Note [Compile events]) ------------------------------------------------------


def enable_dynamo_metrics() -> None:
    """Keep every frame's compilation metrics (the default keeps the last 64)."""
    from torch._dynamo import utils

    utils.set_compilation_metrics_limit(1_000_000)


class CompileProbe:
    """Cumulative compile counters for one backend; `snapshot()` returns them as a dict."""

    def __init__(self, kind: str, compiled=None):
        self.kind = kind
        self.compiled = compiled  # thunder: ThunderFXCompiledObject; dyngen: dyngen Compiled
        from torch._dynamo.utils import counters, get_compilation_metrics

        self._counters = counters
        self._metrics = get_compilation_metrics
        self._base_metrics = len(get_compilation_metrics())

    def _thunder_misses(self) -> int:
        if self.kind == "thunder":
            import thunder

            backend = self.compiled._backend
            return sum(
                thunder.cache_misses(fn)
                for info in backend.subgraph_infos
                for fn in (info.thunder_compiled_fns or [])
            )
        if self.kind.startswith("dyngen"):
            import dyngen

            return int(dyngen.stats()["thunder_cache_misses"])
        return 0

    def snapshot(self) -> dict:
        c = self._counters
        metrics = list(self._metrics())[self._base_metrics :]
        snap = {
            "dynamo_frames": int(c["frames"]["total"]),
            "dynamo_recompiles": sum(1 for m in metrics if m.recompile_reason),
            "dynamo_graphs": int(c["stats"]["unique_graphs"]),
            "thunder_cache_misses": self._thunder_misses(),
            "dyngen_graphs": 0,
            "dyngen_nvrtc": 0,
            "dyngen_fallbacks": 0,
            "dynamo_compile_s": sum(m.entire_frame_compile_time_s or 0.0 for m in metrics),
        }
        if self.kind.startswith("dyngen"):
            import dyngen

            s = dyngen.stats()
            snap["dyngen_graphs"] = int(s["graphs_compiled"])
            snap["dyngen_nvrtc"] = int(s["nvrtc_compiles"])
            snap["dyngen_fallbacks"] = len(s["fallbacks"])
        return snap

    def recompile_reasons(self, limit: int = 20) -> list[str]:
        metrics = list(self._metrics())[self._base_metrics :]
        return [
            f"{m.co_name}: {m.recompile_reason.strip()[:300]}"
            for m in metrics
            if m.recompile_reason
        ][:limit]


def delta(after: dict, before: dict) -> dict:
    d = {k: after[k] - before[k] for k in EVENT_KEYS}
    d["dynamo_compile_s"] = round(after["dynamo_compile_s"] - before["dynamo_compile_s"], 4)
    return d


def event_total(d: dict) -> int:
    return sum(d[k] for k in TOTAL_KEYS)


# ---- summary -------------------------------------------------------------------------------------


def summarize(steps: list[dict], warmup: int, tokens_per_step: int) -> dict:
    """Steady-state figures over the measured steps (index >= warmup); Note [Compile time]."""
    measured = [s for s in steps if s["step"] >= warmup]
    out: dict = {"measured_steps": len(measured)}
    sums = {k: sum(s["events"][k] for s in steps) for k in EVENT_KEYS}
    out["compile_events_total"] = sum(s["compile_events"] for s in steps)
    out["compile_events_after_warmup"] = sum(s["compile_events"] for s in measured)
    out["events_total"] = sums
    out["events_after_warmup"] = {k: sum(s["events"][k] for s in measured) for k in EVENT_KEYS}
    out["dynamo_compile_s"] = round(sum(s["events"]["dynamo_compile_s"] for s in steps), 3)
    if not measured:
        out.update(
            steady_ms=None,
            mean_ms=None,
            min_ms=None,
            tokens_per_s=None,
            compile_s=None,
            steady_basis="no measured steps",
        )
        return out
    quiet = [s["ms"] for s in measured if s["compile_events"] == 0]
    basis = quiet if quiet else [s["ms"] for s in measured]
    steady = statistics.median(basis)
    out["steady_ms"] = round(steady, 3)
    out["steady_basis"] = (
        f"median of {len(quiet)} measured steps without compile events"
        if quiet
        else "median of all measured steps (every one compiled)"
    )
    out["mean_ms"] = round(statistics.fmean(s["ms"] for s in measured), 3)
    out["min_ms"] = round(min(s["ms"] for s in measured), 3)
    out["tokens_per_s"] = round(tokens_per_step / (steady / 1000.0), 1)
    out["compile_s"] = round(
        sum(max(0.0, s["ms"] - steady) for s in steps if s["compile_events"]) / 1000.0, 3
    )
    out["peak_mem_mib"] = round(max(s["peak_mem_mib"] for s in steps), 1)
    return out
