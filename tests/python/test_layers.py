"""The package's layers (frontends/python/dyngen/__init__.py, .importlinter): the contract holds
for the package as it is, and an import that goes up a layer, or a cycle, breaks it."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / ".importlinter"
LINT = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")


def lint(package_parent: Path) -> subprocess.CompletedProcess:
    # grimp reads the source files; the package is not imported, so no library or torch is needed.
    return subprocess.run(
        [LINT, str(CONFIG), "--no-cache"],
        cwd=package_parent,
        text=True,
        capture_output=True,
        env={"PYTHONPATH": str(package_parent), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )


def test_the_package_keeps_its_layers():
    r = lint(REPO / "frontends" / "python")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


@pytest.mark.parametrize(
    "module, line, broken",
    [
        # the C API binding reaching up to the ThunderFX backend
        ("core/ops.py", "from .. import thunderfx", "dyngen's layers"),
        # the counters (a leaf) reaching up to the executors, as stats.py once did
        ("counters.py", "from .executors import runtime", "dyngen's layers"),
        # the exporter and the executors are independent
        ("fx/export.py", "from ..executors import runtime", "dyngen's layers"),
        # an op handler family importing its importer
        ("fx/nn_ops.py", "from . import node_to_ir", "inside fx"),
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path, module, line, broken):
    copy = tmp_path / "dyngen"
    shutil.copytree(
        REPO / "frontends" / "python" / "dyngen",
        copy,
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "bin", "include"),
    )
    path = copy / module
    source = path.read_text()
    # After the module docstring and `from __future__`, where an import would be written.
    anchor = "from __future__ import annotations\n"
    assert anchor in source, module
    path.write_text(source.replace(anchor, anchor + line + "\n", 1))
    r = lint(tmp_path)
    assert r.returncode != 0, r.stdout
    assert f"{broken}" in r.stdout and "BROKEN" in r.stdout, r.stdout
