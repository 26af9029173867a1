"""The kernel cache from Python: where it lives, prebuilding for other GPUs, and what it did.

Note [Prebuilding for other GPUs]
NVRTC needs no GPU, and a binary's cache key depends only on dyngen's version, the arch, the
compiler, the device headers and the generated source (Note [Kernel cache key] in
runtime/cache_key.h). So when `DYNGEN_PREBUILD_ARCHS=sm_80,sm_90a` (or the backend option
`prebuild_archs=`) is set, every graph the frontend compiles is also compiled for those archs into
the cache folder, whatever device runs it: a CPU CI job that runs the training code once fills the
cache that the GPU machines then load without compiling. A prebuild that fails is reported (a
warning, and `stats()["cache"]["prebuild_failed"]`); it never fails the graph itself.
"""

from __future__ import annotations

import os

from ..core.ir import Graph
from ..counters import bump
from ..options import log, parse_archs
from .native import CapiGraphRunner


def cache_dir() -> str:
    """The kernel cache folder the core uses: $DYNGEN_CACHE_DIR, else $XDG_CACHE_HOME/dyngen, else
    ~/.cache/dyngen (runtime/disk_cache.cc, default_cache_dir)."""
    d = os.environ.get("DYNGEN_CACHE_DIR", "")
    if d:
        return d
    x = os.environ.get("XDG_CACHE_HOME", "")
    if x.startswith("/"):
        return os.path.join(x, "dyngen")
    return os.path.join(os.path.expanduser("~"), ".cache", "dyngen")


def check_archs(archs) -> tuple:
    """Prebuild archs as a tuple; ValueError for a name that is not "host" or "sm_<N>[a]"."""
    out = parse_archs(archs)
    for a in out:
        if a != "host" and not (a.startswith("sm_") and a[3:].rstrip("af").isdigit()):
            raise ValueError(f"prebuild arch '{a}': expected host or sm_XY such as sm_80, sm_90a")
    return out


def prebuild(source: Graph | bytes | str, name: str, archs) -> None:
    """Note [Prebuilding for other GPUs]: compiles a built graph (from its handle), graph.fb bytes
    or the IR text for each arch into the cache."""
    if not archs:
        return
    for arch in archs:
        try:
            exe = CapiGraphRunner(source, target=arch)
        except Exception as e:  # noqa: BLE001 - a prebuild never fails the graph it follows
            bump("prebuild_failed")
            log.warning("prebuild of %s for %s failed: %s", name, arch, e)
            continue
        bump("prebuild_compiled" if exe.cache_hit == "miss" else "prebuild_cached")
        log.info(
            "prebuilt %s for %s (%s, key %s)",
            name,
            arch,
            "compiled" if exe.cache_hit == "miss" else "already cached",
            exe.key[:12],
        )


def cache_report(d: dict) -> dict:
    """stats()["cache"]: kernel binaries from the cache vs compiled (one binary holds one graph's
    kernels for one arch), prebuilds included, and the hit rate."""
    memory, disk = d.get("cache_hits_memory", 0), d.get("cache_hits_disk", 0)
    compiled = d.get("nvrtc_compiles", 0)
    lookups = memory + disk + compiled
    return {
        "folder": cache_dir(),
        "from_cache": memory + disk,
        "from_disk": disk,
        "from_memory": memory,
        "compiled": compiled,
        "hit_rate": round((memory + disk) / lookups, 4) if lookups else None,
        "prebuild_compiled": d.get("prebuild_compiled", 0),
        "prebuild_cached": d.get("prebuild_cached", 0),
        "prebuild_failed": d.get("prebuild_failed", 0),
    }
