"""pytest plugin: dyngen in place of ThunderFX, for Thunder's own tests (`-p dyngen_swap`).

Before any test module is imported, `thunder.dynamo.thunderfx` becomes `dyngen.thunderfx.compile`
and `thunder.dynamo.ThunderCompiler` becomes `dyngen.thunderfx.DyngenCompiler` (a subclass), in
every module that re-exports them, so `from thunder.dynamo import thunderfx` in a test module gets
dyngen's. Graphs dyngen takes (symbolic shapes) no longer reach Thunder.
"""

import importlib

SWAPPED_MODULES = (
    "thunder.dynamo",
    "thunder.dynamo.compiler",
    "thunder.dynamo.report",
    "thunder.tests.framework",
)


def pytest_configure(config):
    import dyngen.thunderfx as dfx

    for name in SWAPPED_MODULES:
        mod = importlib.import_module(name)
        if hasattr(mod, "thunderfx"):
            mod.thunderfx = dfx.compile
        if hasattr(mod, "ThunderCompiler"):
            mod.ThunderCompiler = dfx.DyngenCompiler


def pytest_report_header(config):
    import dyngen

    return f"dyngen swapped in for ThunderFX ({dyngen.__file__})"
