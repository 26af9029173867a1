"""`pip install <repo>` into a fresh virtual environment, then a dynamic graph through
dyngen.thunderfx from a folder outside the checkout, with the library the package carries.

Note [Install test without downloading torch]
The fresh venv sees this environment's site-packages through a .pth file (a plain path line:
the .pth files there, such as the checkout's editable dyngen, are not processed), so torch,
Thunder and scikit-build-core come from here and nothing is downloaded. dyngen is installed with
--no-deps --no-build-isolation; its CMake build goes to <repo>/build-pip, so a second run rebuilds
only what changed (and ccache, when installed, serves a fresh folder).
"""

import json
import os
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import importlib.metadata, json, os, torch, dyngen, dyngen.thunderfx, dyngen.core.capi as capi

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.w = torch.nn.Parameter(torch.randn(16, 8) / 4)

        def forward(self, x):
            return torch.nn.functional.silu(x @ self.w) * 2.0

    model = Tiny()
    compiled = dyngen.thunderfx.compile(model, dynamic=True)
    with torch.no_grad():
        for n in (3, 7):
            x = torch.randn(n, 16)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    capi.load()
    versions = [dyngen.__version__, importlib.metadata.version("dyngen")]
    versions.append(capi._lib.dg_version().decode())
    out = {"file": dyngen.__file__, "lib": capi._lib._name, "stats": dyngen.stats()}
    print(json.dumps({**out, "versions": versions}))
""")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, **kw)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return r


@pytest.mark.slow
def test_pip_install_into_a_fresh_venv_runs_a_dynamic_graph(tmp_path):
    pytest.importorskip("scikit_build_core", reason="scikit-build-core is in requirements.txt")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    purelib = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    # Note [Install test without downloading torch] (top of this file).
    shared = [p for p in sys.path if p.endswith("site-packages")] or site.getsitepackages()
    (Path(purelib.stdout.strip()) / "_shared_env.pth").write_text("\n".join(shared) + "\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "DYNGEN_LIB", "DYNGEN_CLI", "DYNGEN_EXECUTOR", "VIRTUAL_ENV")
    }
    cmake_args = []
    if shutil.which("ccache"):
        # The objects scripts/setup.sh's build left in ccache: same flags, same generator, paths
        # relative to the checkout (Note [Install test without downloading torch]).
        cmake_args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
        env.setdefault("CCACHE_BASEDIR", str(REPO))
        env.setdefault("CCACHE_NOHASHDIR", "1")
        env["CMAKE_GENERATOR"] = "Unix Makefiles"
    env["SKBUILD_CMAKE_ARGS"] = ";".join(cmake_args)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--config-settings=build-dir=" + str(REPO / "build-pip"),
            "--config-settings=cmake.build-type=RelWithDebInfo",
            str(REPO),
        ],
        env=env,
    )

    work = tmp_path / "elsewhere"  # outside the checkout: nothing can come from it
    work.mkdir()
    (work / "use_dyngen.py").write_text(SCRIPT)
    env["DYNGEN_CACHE_DIR"] = str(tmp_path / "cache")
    # CPU tensors run the ATen executor by default (Note [Executor choice]); the emulated
    # kernels are what proves the installed library compiles and launches them.
    env["DYNGEN_EXECUTOR"] = "emulate"
    out = run([str(py), "use_dyngen.py"], cwd=work, env=env)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    site_dir = str(venv)
    assert result["file"].startswith(site_dir), result["file"]
    assert result["lib"].startswith(site_dir) and result["lib"].endswith("dyngen/libdyngen.so")
    s = result["stats"]
    assert s["executor"] == "emulate" and s["dynamic_graphs"] == 1 and s["fallbacks"] == []
    assert s["nvrtc_compiles"] >= 1 and s["launches"] >= 2

    # The CLI the package carries: `python -m dyngen` and the `dyngen` command.
    version = run([str(py), "-m", "dyngen", "--version"], cwd=work, env=env).stdout
    # Note [One version]: the package, its metadata, the library and the CLI say the same.
    written = (REPO / "frontends" / "python" / "dyngen" / "VERSION").read_text().strip()
    assert result["versions"] == [written] * 3, result["versions"]
    assert version.startswith(f"dyngen {written} "), version
    stats = run([str(venv / "bin" / "dyngen"), "cache", "stats", "--json"], cwd=work, env=env)
    assert json.loads(stats.stdout)["entries"] == s["nvrtc_compiles"]
    headers = Path(result["lib"]).parent / "include"
    assert (headers / "dyngen.h").is_file() and (headers / "device" / "dg_device.cuh").is_file()
    assert (headers / "dyngen_stats.def").is_file()  # the counters' list, which dyngen.h includes
    if shutil.which("cc"):  # the installed public header compiles as C on its own
        cc = ["cc", "-std=c99", "-fsyntax-only", "-I", str(headers), "-x", "c", "-"]
        run(cc, input='#include "dyngen.h"\n')
