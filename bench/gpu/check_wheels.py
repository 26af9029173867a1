#!/usr/bin/env python
"""Checks, without the H200 machine, that bench/gpu/wheels/ installs there with --no-deps:
every wheel is for CPython 3.12 on manylinux x86_64 (or pure Python), one version per project,
and every requirement of every wheel (markers evaluated for Python 3.12 on Linux x86_64) is met
by another carried wheel or by a package the machine's image already has (MACHINE below, from
the device notes' package list; versions where the notes give them).

    .venv/bin/python bench/gpu/check_wheels.py          # exit 1 and the reasons when not
"""

from __future__ import annotations

import re
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

WHEELS = Path(__file__).resolve().parent / "wheels"
# The H200 image's packages that the carried wheels' requirements name (device notes, KINDS.md,
# read 2026-11). None: present, version not recorded there.
MACHINE = {
    "torch": "2.11.0",
    "numpy": "2.5.2",
    "accelerate": "1.15.0",
    "safetensors": "0.8.0",
    "networkx": None,
    "mpmath": None,
    "opt-einsum": None,
    "packaging": None,
    "pyyaml": None,
    "regex": None,
    "requests": None,
    "tqdm": None,
    "filelock": None,
    "fsspec": None,
    "hf-xet": None,
    "typing-extensions": None,
    "psutil": None,
    "sympy": None,
}
ENV = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}
OK_PLATFORMS = re.compile(
    r"^(any|manylinux1_x86_64|manylinux2010_x86_64|manylinux2014_x86_64|"
    r"manylinux_2_(\d+)_x86_64)$"
)
MAX_GLIBC = 39  # Ubuntu 24.04 (Python 3.12.3) has glibc 2.39


def compatible(tag: Tag) -> bool:
    if tag.interpreter not in ("py3", "py2.py3", "cp312") and not (
        tag.interpreter.startswith("cp3") and tag.abi == "abi3"
    ):
        return False
    if tag.abi not in ("none", "abi3", "cp312"):
        return False
    m = OK_PLATFORMS.match(tag.platform)
    return bool(m) and (m.group(2) is None or int(m.group(2)) <= MAX_GLIBC)


def main() -> int:
    problems = []
    carried = {}
    reqs = {}
    wheels = sorted(WHEELS.glob("*.whl"))
    if not wheels:
        print(f"no wheels in {WHEELS}: run bench/gpu/fetch_wheels.sh")
        return 1
    for w in wheels:
        name, version, _, tags = parse_wheel_filename(w.name)
        if not any(compatible(t) for t in tags):
            problems.append(f"{w.name}: no tag for CPython 3.12 on manylinux x86_64")
        if name in carried:
            problems.append(f"two versions of {name}: {carried[name]} and {version}")
        carried[name] = version
        with zipfile.ZipFile(w) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            msg = Parser().parsestr(z.read(meta).decode())
        reqs[w.name] = [Requirement(r) for r in msg.get_all("Requires-Dist") or []]
    for wheel, rs in reqs.items():
        for r in rs:
            if r.marker is not None and not r.marker.evaluate({**ENV, "extra": ""}):
                continue
            n = canonicalize_name(r.name)
            if n in carried:
                if r.specifier and carried[n] not in r.specifier:
                    problems.append(f"{wheel} needs {r}, carried {n} {carried[n]}")
                continue
            if n not in MACHINE:
                problems.append(f"{wheel} needs {r}: neither carried nor on the machine")
                continue
            v = MACHINE[n]
            if v is not None and r.specifier and Version(v) not in r.specifier:
                problems.append(f"{wheel} needs {r}, the machine has {n} {v}")
    size = sum(w.stat().st_size for w in wheels)
    for n, v in sorted(carried.items()):
        print(f"  {n} {v}")
    print(f"{len(wheels)} wheels, {size / 2**20:.1f} MiB")
    for p in problems:
        print("PROBLEM:", p)
    print("ok" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
