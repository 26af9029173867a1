"""`dyngen.stats()` and `dyngen.reset_stats()`: one dict that tells whether anything recompiled.

It merges the frontend's counters (counters.py) with the C library's (all of them, by name) once the
library is loaded, sums Thunder's cache misses over every Thunder-compiled graph of every live
ThunderFX backend, and adds the kernel cache's report. DYNGEN_CACHE_SUMMARY=1 prints one line of
it at exit. It sits on top of the executors because it reads them; nothing below imports it.
"""

from __future__ import annotations

import atexit
import sys

from . import counters
from .executors import runtime
from .executors.cache import cache_report
from .options import options


def stats() -> dict:
    d, used = counters.snapshot()
    runtime.executor_kind()  # loads the library first: a process may use the C API directly
    capi = runtime.capi_stats()
    if capi is not None:
        # Every counter of the C library (runtime/dyngen_stats.def lists them). One the frontend
        # counts too is summed: the ATen executor's compiles are counted here, the C ones there.
        for k, v in capi.items():
            d[k] = d.get(k, 0) + v
    d["executor"] = used or runtime.executor_name(*runtime.plan_for(None))
    d["thunder_cache_misses"] = counters.thunder_cache_misses()
    d["cache"] = cache_report(d)
    return d


def reset_stats() -> None:
    """Zeroes every counter (Thunder's own cache counters belong to its compiled functions)."""
    counters.reset()
    runtime.reset_capi_stats()


def summary_line() -> str:
    """The one line DYNGEN_CACHE_SUMMARY=1 prints at exit."""
    s = stats()
    c = s["cache"]
    if s["executor"] == "reference":
        return f"dyngen cache: {s['executor']} executor, no kernel cache used"
    rate = "n/a" if c["hit_rate"] is None else f"{100 * c['hit_rate']:.0f}%"
    line = (
        f"dyngen cache: {c['from_cache']} kernel binaries from the cache ({c['from_disk']} "
        f"disk, {c['from_memory']} memory), {c['compiled']} compiled, hit rate {rate}"
    )
    if c["prebuild_compiled"] or c["prebuild_cached"] or c["prebuild_failed"]:
        line += (
            f"; prebuilt {c['prebuild_compiled']} compiled, {c['prebuild_cached']} cached, "
            f"{c['prebuild_failed']} failed"
        )
    return line + f" [{c['folder']}]"


def _print_summary() -> None:
    try:
        print(summary_line(), file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 - exit must not fail over a report
        print(f"dyngen cache: no summary ({type(e).__name__}: {e})", file=sys.stderr)


if options().cache_summary:
    atexit.register(_print_summary)
