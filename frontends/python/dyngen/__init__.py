"""dyngen: compile FX graphs with symbolic token counts once, for every token count.

    import dyngen.thunderfx
    model = dyngen.thunderfx.compile(model)   # ThunderFX, with dynamic graphs going to dyngen
    dyngen.stats()                            # what was compiled, cached, or ran eagerly

The package follows the data path, top to bottom; a module imports only from layers below it
(.importlinter at the repository root holds the contract, and the test suite checks it):

    thunderfx           the ThunderFX backend: static graphs to Thunder, dynamic ones down here
    aot | graph_check   AOTAutograd: dyngen compiles the forward and the backward; the check of
                        each Dynamo graph against eager (DYNGEN_CHECK_GRAPHS)
    partition | views   graphs with ops dyngen cannot take, compiled in regions around them;
                        outputs that are views of inputs rebuilt as true views
    report              dyngen.stats() / reset_stats(): the counters, the C library's, the cache's
    compiled            an exported graph bound to a GraphRunner, called with FX arguments
    fx | executors      fx: FX graph -> IR (export.py, node_to_ir.py and the FX op handler
                        registry, one module per op family); executors: IR -> a GraphRunner (the
                        C executor, the ATen executor, the kernel cache); the two never import
                        each other
    core                the C API binding: library, graph handles, the IR builder, element types
    counters            what happened, counted (fallbacks warned once, or raised when strict)
    options | errors    the environment read once; the exceptions

`dyngen.thunderfx` and `dyngen.aot` import Thunder and AOTAutograd, so they load on first use.
"""

from pathlib import Path as _Path

from .compiled import CompiledGraph, compile_fx_graph
from .errors import (
    ExportError,
    FallbackError,
    FallbackWarning,
    InvalidGraph,
    LaunchError,
    LibraryNotFound,
    Unsupported,
)
from .executors.cache import cache_dir
from .executors.graph_runner import GraphRunner
from .executors.runtime import compile_ir, compile_text, executor_kind
from .fx.export import Exported, export
from .report import reset_stats, stats  # also registers DYNGEN_CACHE_SUMMARY's report at exit

__all__ = [
    "Unsupported",
    "ExportError",
    "FallbackError",
    "FallbackWarning",
    "InvalidGraph",
    "LaunchError",
    "LibraryNotFound",
    "Exported",
    "export",
    "CompiledGraph",
    "compile_fx_graph",
    "GraphRunner",
    "compile_ir",
    "compile_text",
    "executor_kind",
    "stats",
    "reset_stats",
    "thunderfx",
    "aot",
    "cache_dir",
]
# The VERSION file beside this one is the only place the version is written (Note [One version]
# in the top CMakeLists.txt).
__version__ = (_Path(__file__).parent / "VERSION").read_text().strip()


def __getattr__(name):
    if name in ("thunderfx", "aot"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(name)
