"""The results table, the JSON file and the step-time plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

COLUMNS = (
    "backend",
    "steady step ms",
    "vs eager",
    "mean step ms",
    "tokens/s",
    "compile events after warm-up",
    "total compiles",
    "compile s",
    "peak MiB",
    "status",
)
TOTAL_KEYS = ("dynamo_frames", "thunder_cache_misses", "dyngen_graphs")  # metrics.TOTAL_KEYS


def _fmt(v, nd=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def rows(results: dict) -> list[list[str]]:
    eager = results.get("eager", {}).get("summary", {}).get("steady_ms")
    out = []
    for name, r in results.items():
        s = r.get("summary") or {}
        steady = s.get("steady_ms")
        ratio = (steady / eager) if (steady and eager) else None
        if r.get("status") == "ok":
            status = "ok" + (" (time budget hit)" if r.get("truncated") else "")
            fb = (s.get("events_total") or {}).get("dyngen_fallbacks")
            if fb:
                status += f", {fb} dyngen fallbacks"
            ex = (r.get("dyngen_stats") or {}).get("executor")
            if ex:
                status += f", executor {ex}"
                if ex in ("emulate", "capi") and r.get("device") == "cpu":  # "capi": older runs
                    status += " (CUDA kernels under host emulation)"
        elif r.get("status") == "skipped":
            status = f"skipped: {r.get('reason', '')}"
        else:
            status = f"ERROR {r.get('error', '')}"
        after = s.get("compile_events_after_warmup")
        ev = s.get("events_after_warmup") or {}
        if after:
            parts = [f"{k}={v}" for k, v in ev.items() if v and k != "dynamo_recompiles"]
            after = f"{after} ({', '.join(parts)})"
        total = s.get("compile_events_total")
        stop = r.get("events_at_stop")
        if stop and r.get("status") == "error":
            total = f"{sum(stop[k] for k in TOTAL_KEYS)} by the stop"
        out.append(
            [
                name,
                _fmt(steady),
                _fmt(ratio, 2) + ("x" if ratio else ""),
                _fmt(s.get("mean_ms")),
                _fmt(s.get("tokens_per_s"), 0),
                _fmt(after),
                _fmt(total),
                _fmt(s.get("compile_s"), 2),
                _fmt(s.get("peak_mem_mib"), 0),
                status,
            ]
        )
    return out


def table(results: dict) -> str:
    body = rows(results)
    widths = [
        max(len(c), *(len(r[i]) for r in body)) if body else len(c) for i, c in enumerate(COLUMNS)
    ]
    widths[-1] = max(len(COLUMNS[-1]), *(min(len(r[-1]), 100) for r in body)) if body else 6
    line = (
        lambda cells: (
            "| "
            + " | ".join(  # noqa: E731
                (c if len(c) <= w else c[: w - 3] + "...").ljust(w) for c, w in zip(cells, widths)
            )
            + " |"
        )
    )
    sep = "|-" + "-|-".join("-" * w for w in widths) + "-|"
    return "\n".join([line(COLUMNS), sep] + [line(r) for r in body])


def write_json(path: str | Path, payload: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")


def plot(path: str | Path, results: dict, title: str, warmup: int) -> str | None:
    """Step time per step per backend (log scale: compile steps are orders of magnitude longer).
    Returns None on success, else why no plot was written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        return f"matplotlib unavailable: {e}"
    fig, ax = plt.subplots(figsize=(9, 5))
    drawn = 0
    for name, r in results.items():
        steps = r.get("steps") or []
        if not steps:
            continue
        xs = [s["step"] for s in steps]
        ys = [s["ms"] for s in steps]
        (line,) = ax.plot(xs, ys, marker="o", markersize=3, label=name)
        comp = [(x, y) for x, y, s in zip(xs, ys, steps) if s["compile_events"]]
        if comp:
            ax.scatter(*zip(*comp), marker="x", s=40, color=line.get_color())
        drawn += 1
    if not drawn:
        plt.close(fig)
        return "no backend produced steps"
    if warmup > 0:
        ax.axvspan(-0.5, warmup - 0.5, color="0.9", label="warm-up")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("step time (ms, log scale); x = step with compile events")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
