"""dyngen: compile FX graphs with symbolic token counts once, for every token count.

    import dyngen.thunderfx
    model = dyngen.thunderfx.compile(model)   # ThunderFX, with dynamic graphs going to dyngen
    dyngen.stats()                            # what was compiled, cached, or ran eagerly

Modules: export (FX -> IR), ir (graphs built through the core's C API: Note [One IR]), runtime (the
executor seam), aot (AOTAutograd), thunderfx (the ThunderFX backend), stats.
`dyngen.thunderfx` imports Thunder, so it is loaded on first use.
"""
from .errors import (ExportError, FallbackError, FallbackWarning, InvalidGraph, LaunchError,
                     LibraryNotFound, Unsupported)
from .export import Exported, export
from .compiled import CompiledGraph, compile_graph
from .runtime import Executable, compile_ir, compile_text, executor_kind
from .stats import reset_stats, stats
from .cache import cache_dir  # also registers DYNGEN_CACHE_SUMMARY's report at exit

__all__ = ["Unsupported", "ExportError", "FallbackError", "FallbackWarning", "InvalidGraph",
           "LaunchError", "LibraryNotFound", "Exported", "export", "CompiledGraph", "compile_graph",
           "Executable", "compile_ir", "compile_text", "executor_kind", "stats", "reset_stats",
           "thunderfx", "aot", "cache_dir"]
__version__ = "0.1.0"


def __getattr__(name):
    if name in ("thunderfx", "aot"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(name)
