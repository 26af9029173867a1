"""The FX op handler registry: op name -> the handler that emits its IR.

Note [FX op handler registry]
Each op family is one module (basic_ops, nn_ops, select_ops, attention_ops, moe_ops, sort_ops) that
defines its handlers and registers them here when it is imported; node_to_ir.py imports the
families and dispatches through HANDLERS, and export.py imports node_to_ir.py. So a family
imports this module and never its importer, and a new op's handler goes into the family it
belongs to. A name is registered once: a second family claiming it is an error at import, not a
silent override.
"""

from __future__ import annotations

from collections.abc import Callable

HANDLERS: dict[str, Callable] = {}


def register(table: dict[str, Callable]) -> None:
    """Adds one family's handlers; raises if a name is registered already."""
    taken = sorted(set(table) & set(HANDLERS))
    if taken:
        raise ValueError(f"FX op handlers registered twice: {', '.join(taken)}")
    HANDLERS.update(table)
