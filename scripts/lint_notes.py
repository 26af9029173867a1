"""The Note linter: every `Note [Title]` reference names exactly one heading, and every heading is
referenced from somewhere else.

A Note is a cross-cutting decision written down once, where the code that makes it lives (the
convention of GHC's compiler sources). Its heading is a comment line that holds the title and
nothing else:

    // Note [Paired stores]
    // Tensor-core epilogues write two columns at a time when ...

(`#` and docstring lines too). Any other mention of `Note [Title]`
is a reference: `(Note [Paired stores] in codegen/device/dg_store.cuh)`. The linter fails when
a reference names no heading (a Note renamed or deleted), when two headings share a title (a
reference could not say which it means), or when a heading is never referenced (a decision that
nothing points to is a comment, not a Note).

    python3 scripts/lint_notes.py [ROOT]     files: `git ls-files` under ROOT, else every file
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

NOTE = re.compile(r"Note \[([^\]\n]+)\]")
# A heading line: optional comment markers or a docstring opener, the Note, nothing else.
HEADING = re.compile(r'^\s*(?://+|#+|\*|/\*+|"""|\'\'\')?\s*Note \[([^\]\n]+)\]\s*$')
SUFFIXES = {".cc", ".h", ".cuh", ".cu", ".py", ".sh", ".txt", ".cmake", ".def", ".fbs", ".md"}
SKIP_PARTS = {".git", ".venv", "build", "node_modules", "__pycache__"}


def source_files(root: Path) -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.split("\n")
        files = [root / f for f in listed if f]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in root.rglob("*") if p.is_file()]
    keep = []
    for f in files:
        rel = f.relative_to(root)
        if f.suffix in SUFFIXES and not SKIP_PARTS.intersection(rel.parts) and f.is_file():
            keep.append(f)
    # The linter's own text describes Notes without being one.
    return [f for f in keep if f.name != "lint_notes.py"]


def collect(root: Path):
    headings: dict[str, list[str]] = defaultdict(list)
    references: dict[str, list[str]] = defaultdict(list)
    for f in source_files(root):
        try:
            lines = f.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        rel = f.relative_to(root)
        for number, line in enumerate(lines, 1):
            where = f"{rel}:{number}"
            heading = HEADING.match(line)
            if heading:
                headings[heading.group(1)].append(where)
                continue
            for title in NOTE.findall(line):
                references[title].append(where)
    return headings, references


def problems(root: Path) -> list[str]:
    headings, references = collect(root)
    found = []
    for title, places in sorted(references.items()):
        if title not in headings:
            found.append(f"{places[0]}: Note [{title}] has no heading (referenced {len(places)}x)")
    for title, places in sorted(headings.items()):
        if len(places) > 1:
            found.append(f"{places[1]}: Note [{title}] has a second heading (first {places[0]})")
        if title not in references:
            found.append(f"{places[0]}: Note [{title}] is never referenced")
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent)
    found = problems(root)
    for line in found:
        print(line)
    headings, references = collect(root)
    print(
        f"lint_notes: {len(headings)} Notes, {sum(map(len, references.values()))} references, "
        f"{len(found)} problems"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
