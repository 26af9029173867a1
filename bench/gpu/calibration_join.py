"""The join half of calibrate_model.py (no GPU): `dyngen plan` per graph and binding, its kernels
matched by name with the profiled ones, and the table (calibration.json, calibration.md).

Names: codegen emits each kernel `extern "C"` under the plan's name (k<N>_<what>[_<variant>]), so
the profiler shows them as they are; a name is still matched without a signature or namespace,
and, failing that, to the longest plan name it ends or starts with at a `_`/`::` boundary (row
marked `affix`). A profiled kernel with no plan kernel is `unmatched`, a launched plan kernel never
profiled is `missing`: nothing is dropped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def base_name(name: str) -> str:
    """A profiled kernel name without return type, parameters, template arguments or namespace."""
    n = re.sub(r"^void\s+", "", name.strip()).split("(", 1)[0]
    n = re.sub(r"<.*>$", "", n)
    return n.rsplit("::", 1)[-1].strip()


def match_name(profiled: str, plan_names: list[str]) -> tuple[str | None, str]:
    """The plan kernel a profiled name is, and how it was found: exact, normalized, affix, or
    (None, why not)."""
    if profiled in plan_names:
        return profiled, "exact"
    base = base_name(profiled)
    if base in plan_names:
        return base, "normalized"
    found = [
        p
        for p in plan_names
        if re.search(rf"(^|_|::){re.escape(p)}$", base) or re.match(rf"{re.escape(p)}_", base)
    ]
    if not found:
        return None, "no plan kernel of that name"
    longest = max(len(p) for p in found)
    best = [p for p in found if len(p) == longest]
    if len(best) > 1:
        return None, f"ambiguous: {', '.join(sorted(best))}"
    return best[0], "affix"


def measured_kernels(records) -> dict[str, dict]:
    """Per profiled kernel name: the median over calls of its device time in one call (us), the
    launches per call, and the calls it appeared in. `records`: dicts with name, us and call, or
    (name, us[, call]) tuples; records without a call count as one call each."""
    per: dict[str, dict] = {}
    for i, r in enumerate(records):
        name, us, call = (
            (r["name"], r["us"], r.get("call")) if isinstance(r, dict) else (*r, None)[:3]
        )
        calls = per.setdefault(name, {})
        key = call if call is not None else f"record{i}"
        total, n = calls.get(key, (0.0, 0))
        calls[key] = (total + float(us), n + 1)
    return {
        name: {
            "us": statistics.median(t for t, _ in calls.values()),
            "launches": statistics.median(n for _, n in calls.values()),
            "calls": len(calls),
        }
        for name, calls in per.items()
    }


def join(measured: dict[str, dict], plan: dict) -> dict:
    """Rows per plan kernel that ran, the profiled kernels without a plan kernel (`unmatched`),
    the launched plan kernels never profiled (`missing`), and the sums."""
    kernels = {k["name"]: k for k in plan.get("kernels", [])}
    names = list(kernels)
    rows, unmatched, seen = [], [], set()
    for profiled, m in sorted(measured.items()):
        name, how = match_name(profiled, names)
        if name is None:
            unmatched.append({"kernel": profiled, "measured_us": m["us"], "why": how})
            continue
        k = kernels[name]
        seen.add(name)
        est = k["estimated_seconds"] * 1e6
        launch = ((k.get("bounds") or {}).get("launch_seconds") or 0.0) * 1e6
        rows.append(
            {
                "kernel": name,
                "profiled_as": profiled,
                "match": how,
                "launched_in_plan": bool(k.get("launched")),
                "launches_per_call": m["launches"],
                "estimated_us": est,
                "launch_us": launch,
                "estimated_less_launch_us": est - launch,
                "measured_us": m["us"],
                "ratio": m["us"] / est if est > 0 else None,
                "ratio_less_launch": m["us"] / (est - launch) if est - launch > 0 else None,
                "limiter": k.get("limiter"),
            }
        )
    missing = [
        {"kernel": n, "estimated_us": k["estimated_seconds"] * 1e6, "limiter": k.get("limiter")}
        for n, k in kernels.items()
        if k.get("launched") and n not in seen
    ]
    launched = [k for k in kernels.values() if k.get("launched")]
    est_sum = sum(k["estimated_seconds"] for k in launched) * 1e6
    launch_sum = sum((k.get("bounds") or {}).get("launch_seconds") or 0.0 for k in launched) * 1e6
    measured_sum = sum(m["us"] for m in measured.values())
    summary = {
        "estimated_us": est_sum,
        "estimated_less_launch_us": est_sum - launch_sum,
        "measured_us": measured_sum,
        "ratio": measured_sum / est_sum if est_sum > 0 and measured else None,
        "kernels_matched": len(rows),
        "kernels_unmatched": len(unmatched),
        "kernels_missing": len(missing),
    }
    return {"rows": rows, "unmatched": unmatched, "missing": missing, "summary": summary}


def find_cli(given: str | None) -> Path | None:
    """The dyngen CLI: --dyngen-cli, $DYNGEN_CLI, beside $DYNGEN_LIB, build/dyngen, or PATH."""
    lib = os.environ.get("DYNGEN_LIB")
    for c in (
        given,
        os.environ.get("DYNGEN_CLI"),
        str(Path(lib).parent / "dyngen") if lib else None,
        str(REPO / "build" / "dyngen"),
        shutil.which("dyngen"),
    ):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c)
    return None


def run_plan(cli: Path, graph: Path, bindings: dict) -> tuple[dict | None, str]:
    """`dyngen plan GRAPH --bind ... --gpu h200 --baseline eager --json`: (plan, "") or (None,
    why)."""
    binds = [a for sym, n in sorted(bindings.items()) for a in ("--bind", f"{sym}={n}")]
    cmd = [str(cli), "plan", str(graph), *binds, "--gpu", "h200", "--baseline", "eager", "--json"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{type(e).__name__}: {e}"
    if r.returncode != 0:
        return None, f"dyngen plan exit {r.returncode}: {r.stderr.strip()[-500:]}"
    try:
        return json.loads(r.stdout), ""
    except json.JSONDecodeError as e:
        return None, f"dyngen plan printed no JSON: {e}"


def graph_label(expert: str, name: str, bindings: dict) -> str:
    """`olmoe/forward` for the graph `graph0.forward` (a region keeps its suffix); `(static)` when
    it binds no symbol (Dynamo specialized the token count, e.g. duck-sized to a static dim)."""
    label = f"{expert}/{name.split('.', 1)[1] if '.' in name else name}"
    return label if bindings else f"{label} (static)"


def calibrate(measured: dict, graph_dir: Path, cli: Path | None, jobs: int = 8) -> dict:
    """The join half: plans for every graph and binding measured, joined with the records."""
    graphs = measured.get("graphs", {})
    wanted = {}
    for p in measured["points"]:
        for stem, bind in p["bindings"].items():
            wanted[(stem, tuple(sorted(bind.items())))] = bind

    def plan_of(key):
        stem, _ = key
        fb = graph_dir / graphs.get(stem, {}).get("fb", f"{stem}.fb")
        if cli is None:
            return None, "no dyngen CLI (--dyngen-cli, DYNGEN_CLI or build/dyngen)"
        if not fb.is_file():
            return None, f"no graph file {fb}"
        return run_plan(cli, fb, wanted[key])

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        plans = dict(zip(wanted, pool.map(plan_of, wanted)))
    keys = ("device", "torch", "executor", "timing", "reps", "warmup")
    out = {k: measured.get(k) for k in keys}
    out.update(
        {
            "cli": str(cli) if cli else None,
            "points": [],
            "outside_dyngen": [],
            "failures": list(measured.get("failures", [])),
        }
    )
    for p in measured["points"]:
        for stem in sorted(p["bindings"], key=lambda s: graphs.get(s, {}).get("name", s)):
            bind = p["bindings"][stem]
            plan, error = plans[(stem, tuple(sorted(bind.items())))]
            records = [r for r in p["records"] if r["graph"] == stem]
            joined = join(measured_kernels(records), plan or {})
            entry = {
                "expert": p["expert"],
                "graph": graph_label(p["expert"], graphs.get(stem, {}).get("name", stem), bind),
                "stem": stem,
                "tokens": p["tokens"],
                "bindings": bind,
                "graph_call_ms": p["graph_call_ms"].get(stem),
                "step_ms": p.get("step_ms"),
                **joined,
            }
            if error:
                entry["plan_error"] = error
                out["failures"].append(f"{entry['graph']} s={p['tokens']}: {error}")
            out["points"].append(entry)
        outside = measured_kernels([r for r in p["records"] if r["graph"] is None])
        out["outside_dyngen"].append(
            {
                "expert": p["expert"],
                "tokens": p["tokens"],
                "kernels": {n: m["us"] for n, m in sorted(outside.items())},
            }
        )
    return out


def _f(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def format_markdown(report: dict) -> str:
    """calibration.md: one table of kernels, then a summary line per graph and token count."""
    lines = [
        f"# Model against measurement on {report.get('device')} "
        f"(executor {report.get('executor')})",
        "",
        "Measured: median over calls of a kernel's device time per graph call (torch.profiler). "
        "Estimate: `dyngen plan --gpu h200`; `est-launch` leaves out the fixed launch cost. "
        "Ratios are measured / estimate.",
        "",
        "| graph | s | kernel | launches | est us | est-launch us | measured us | ratio "
        "| ratio (est-launch) | limiter |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for p in report["points"]:
        for r in p["rows"]:
            note = "" if r["launched_in_plan"] else " (plan: not launched)"
            note += "" if r["match"] in ("exact", "normalized") else f" ({r['profiled_as']})"
            lines.append(
                f"| {p['graph']} | {p['tokens']} | {r['kernel']}{note} | "
                f"{_f(r['launches_per_call'], 'g')} | {r['estimated_us']:.2f} | "
                f"{r['estimated_less_launch_us']:.2f} | {r['measured_us']:.2f} | "
                f"{_f(r['ratio'], '.2f')} | {_f(r['ratio_less_launch'], '.2f')} | {r['limiter']} |"
            )
        for u in p["unmatched"]:
            lines.append(
                f"| {p['graph']} | {p['tokens']} | UNMATCHED {u['kernel']} ({u['why']}) | | | | "
                f"{u['measured_us']:.2f} | | | |"
            )
        for m in p["missing"]:
            lines.append(
                f"| {p['graph']} | {p['tokens']} | MISSING {m['kernel']} (planned, not profiled) "
                f"| | {m['estimated_us']:.2f} | | | | | {m['limiter']} |"
            )
    lines += ["", "## Per graph", ""]
    for p in report["points"]:
        s = p["summary"]
        lines.append(
            f"- {p['graph']} s={p['tokens']}: estimates {s['estimated_us']:.1f} us "
            f"({s['estimated_less_launch_us']:.1f} us less launches), kernels measured "
            f"{s['measured_us']:.1f} us (ratio {_f(s['ratio'], '.2f')}), graph call "
            f"{_f(p['graph_call_ms'] and p['graph_call_ms'] * 1e3, '.1f')} us "
            f"({report.get('timing') or 'timed'}); "
            f"{s['kernels_matched']} matched, {s['kernels_unmatched']} unmatched, "
            f"{s['kernels_missing']} missing"
            + (f"; PLAN FAILED: {p['plan_error']}" if p.get("plan_error") else "")
        )
    for o in report["outside_dyngen"]:
        if o["kernels"]:
            listed = ", ".join(f"{n} {us:.1f} us" for n, us in o["kernels"].items())
            lines.append(f"- outside dyngen's graph calls, {o['expert']} s={o['tokens']}: {listed}")
    for f in report["failures"]:
        lines.append(f"- FAILED: {f}")
    return "\n".join(lines) + "\n"
