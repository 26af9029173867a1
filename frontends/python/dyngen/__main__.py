"""`python -m dyngen ARGS` (and the `dyngen` command of an installed package): the CLI.

The installed package carries the CLI binary as dyngen/bin/dyngen (next to libdyngen.so); in a
checkout it is <repo>/build/dyngen. $DYNGEN_CLI overrides both.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def cli_candidates() -> list[Path]:
    here = Path(__file__).resolve().parent
    out = [Path(os.environ["DYNGEN_CLI"])] if os.environ.get("DYNGEN_CLI") else []
    out.append(here / "bin" / "dyngen")
    repo = here.parent.parent.parent  # frontends/python/dyngen -> the checkout
    if (repo / "CMakeLists.txt").is_file():
        out.append(repo / "build" / "dyngen")
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for path in cli_candidates():
        if path.is_file() and os.access(path, os.X_OK):
            sys.stdout.flush()
            os.execv(str(path), [str(path), *args])  # does not return
    tried = ", ".join(str(p) for p in cli_candidates())
    print(
        f"dyngen: the CLI binary was not found (tried {tried}); install the package with "
        "`pip install <repo>` or build it with CMake",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
