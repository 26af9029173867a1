"""Options read once from the environment (DYNGEN_*), and the package logger."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    log: str = ""  # DYNGEN_LOG: "", "info" or "debug"
    dump_dir: str = ""  # DYNGEN_DUMP: folder for each exported graph (graph.fb + IR text)
    lib_path: str = ""  # DYNGEN_LIB: path to libdyngen.so
    executor: str = ""  # DYNGEN_EXECUTOR: "", "reference" or "emulate": Note [Executor choice]
    target: str = ""  # DYNGEN_TARGET: dg_compile_options.target ("": from the tensors)
    strict: bool = False  # DYNGEN_STRICT=1: a fallback raises instead of warning
    # DYNGEN_TEST_DRIVER_DOUBLE=1 (tests only): CPU tensors take the GPU path (target cuda:0)
    # through the driver double that DYNGEN_CUDA_DRIVER names, its device memory being host memory.
    driver_double: bool = False
    prebuild_archs: tuple = ()  # DYNGEN_PREBUILD_ARCHS=sm_80,sm_90a: also compile for these
    cache_summary: bool = False  # DYNGEN_CACHE_SUMMARY=1: one line about the kernel cache at exit
    # DYNGEN_CHECK_GRAPHS=N: each Dynamo graph's first N calls checked against eager, and
    # DYNGEN_CHECK_GRAPHS_DIR: where the bad ones are saved (Note [Checking graphs against eager])
    check_graphs: int = 0
    check_graphs_dir: str = ""
    # DYNGEN_DISABLE_PASSES=wgmma[,pass...]: what `dyngen compile --disable-pass` skips, for every
    # graph this process compiles (A/B runs: "wgmma" puts sm_90a's GEMMs back on mma.sync). A
    # name that is neither a pass nor a codegen switch fails the compile, naming the known ones.
    disabled_passes: tuple = ()

    @staticmethod
    def from_env() -> Options:
        e = os.environ
        return Options(
            log=e.get("DYNGEN_LOG", "").lower(),
            dump_dir=e.get("DYNGEN_DUMP", ""),
            lib_path=e.get("DYNGEN_LIB", ""),
            executor=e.get("DYNGEN_EXECUTOR", "").lower(),
            target=e.get("DYNGEN_TARGET", ""),
            strict=e.get("DYNGEN_STRICT", "0") not in ("", "0"),
            driver_double=e.get("DYNGEN_TEST_DRIVER_DOUBLE", "0") not in ("", "0"),
            prebuild_archs=parse_archs(e.get("DYNGEN_PREBUILD_ARCHS", "")),
            cache_summary=e.get("DYNGEN_CACHE_SUMMARY", "") not in ("", "0"),
            check_graphs=int(e.get("DYNGEN_CHECK_GRAPHS", "0") or 0),
            check_graphs_dir=e.get("DYNGEN_CHECK_GRAPHS_DIR", ""),
            disabled_passes=parse_archs(e.get("DYNGEN_DISABLE_PASSES", "")),
        )


def parse_archs(archs) -> tuple:
    """ "sm_80,sm_90a" (or a list of names) -> ("sm_80", "sm_90a"); blanks dropped, order kept.
    Pass lists take the same form."""
    if archs is None:
        return ()
    items = archs.split(",") if isinstance(archs, str) else list(archs)
    out = []
    for a in (str(x).strip() for x in items):
        if a and a not in out:
            out.append(a)
    return tuple(out)


_options = Options.from_env()
log = logging.getLogger("dyngen")


def _configure_logging(opts: Options) -> None:
    level = {"debug": logging.DEBUG, "info": logging.INFO}.get(opts.log)
    if level is None:
        return
    log.setLevel(level)
    if not log.handlers:
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("[dyngen %(levelname)s] %(message)s"))
        log.addHandler(h)


_configure_logging(_options)


def options() -> Options:
    return _options


def set_options(**changes) -> Options:
    """Replaces options for this process (tests; normally the environment decides)."""
    global _options
    _options = Options(**{**_options.__dict__, **changes})
    _configure_logging(_options)
    return _options
