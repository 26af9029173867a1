"""Options read once from the environment (DYNGEN_*), and the package logger."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    log: str = ""            # DYNGEN_LOG: "", "info" or "debug"
    dump_dir: str = ""       # DYNGEN_DUMP: folder for each exported graph (graph.fb + IR text)
    lib_path: str = ""       # DYNGEN_LIB: path to libdyngen.so
    executor: str = ""       # DYNGEN_EXECUTOR: "capi" or "" (the only executor; others are errors)
    target: str = ""         # DYNGEN_TARGET: dg_compile_options.target ("" lets the core choose)

    @staticmethod
    def from_env() -> "Options":
        e = os.environ
        return Options(log=e.get("DYNGEN_LOG", "").lower(), dump_dir=e.get("DYNGEN_DUMP", ""),
                       lib_path=e.get("DYNGEN_LIB", ""),
                       executor=e.get("DYNGEN_EXECUTOR", "").lower(),
                       target=e.get("DYNGEN_TARGET", ""))


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
