"""The Note linter (scripts/lint_notes.py): the tree passes it, and each rule it enforces fails a
small tree that breaks it."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINTER = REPO / "scripts" / "lint_notes.py"


def note(title: str) -> str:
    # Spelled in pieces so that this file holds no Note for the linter to check.
    return "Note " + "[" + title + "]"


HEADING = f"// {note('Paired stores')}\n// Two columns at a time.\nint pair;\n"


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(LINTER), str(root)], capture_output=True, text=True, check=False
    )


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_repository_passes():
    result = lint(REPO)
    assert result.returncode == 0, result.stdout
    assert "0 problems" in result.stdout


def test_a_referenced_heading_passes(tmp_path):
    root = tree(tmp_path, {"a.cc": HEADING, "b.py": f"x = 1  # {note('Paired stores')}\n"})
    assert lint(root).returncode == 0


def test_a_dangling_reference_fails(tmp_path):
    refs = f"// Stores ({note('Paired stores')}) and ({note('Missing')}).\n"
    result = lint(tree(tmp_path, {"a.cc": HEADING, "b.cc": refs}))
    assert result.returncode == 1
    assert f"b.cc:1: {note('Missing')} has no heading" in result.stdout


def test_an_unreferenced_heading_fails(tmp_path):
    result = lint(tree(tmp_path, {"a.cc": HEADING}))
    assert result.returncode == 1
    assert f"a.cc:1: {note('Paired stores')} is never referenced" in result.stdout


def test_two_headings_with_one_title_fail(tmp_path):
    refs = f"// see {note('Paired stores')}\n"
    result = lint(tree(tmp_path, {"a.cc": HEADING, "b.h": HEADING, "c.cc": refs}))
    assert result.returncode == 1
    assert f"{note('Paired stores')} has a second heading" in result.stdout
