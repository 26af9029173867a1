"""Symbolic booleans in graphs: comparisons of SymInts (`s0 > 5`, `operator.gt`), `sym_not`,
`and`/`or` of them.

Note [SymBool values]
A SymBool node is kept as a SymBool (the comparison and its two SymExprs), not computed: asserts
that consume it are dropped (they hold for every call Dynamo's guards admit), a graph output
that is one is evaluated at call time from the bound symbols, and a tensor op that takes one as
an operand (torch.where(s0 > 5, a, b), mask * (s0 > 5)) gets the comparison of two
`sym_constant`s, a rank-0 bool tensor computed at call time.
"""

from __future__ import annotations

import operator

import torch

from ..errors import Unsupported

_COMPARE = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


class SymBool:
    """op(lhs, rhs) for a comparison; "not"/"and"/"or" of SymBools."""

    def __init__(self, op: str, lhs, rhs=None):
        self.op, self.lhs, self.rhs = op, lhs, rhs

    def evaluate(self, bind: dict[str, int]) -> bool:
        if self.op == "not":
            return not self.lhs.evaluate(bind)
        if self.op in ("and", "or"):
            a, b = self.lhs.evaluate(bind), self.rhs.evaluate(bind)
            return (a and b) if self.op == "and" else (a or b)
        a = _value(self.lhs, bind)
        b = _value(self.rhs, bind)
        return _COMPARE[self.op](a, b)

    def materialize(self, c):
        """A rank-0 bool tensor with this value (Note [SymBool values])."""
        from ..core.ops import DType

        if self.op == "not":
            return c.op("eq", [self.lhs.materialize(c), c.const(False)])
        if self.op in ("and", "or"):
            a, b = self.lhs.materialize(c), self.rhs.materialize(c)
            both = c.op("add", [c.cast(a, DType.I64), c.cast(b, DType.I64)])
            # a or b: a + b >= 1; a and b: a + b == 2
            op, bound = ("ge", 1) if self.op == "or" else ("eq", 2)
            return c.op(op, [both, c.const(bound)])
        return c.op(
            self.op,
            [
                c.sym_scalar(c.ex.sym(self.lhs), DType.I64),
                c.sym_scalar(c.ex.sym(self.rhs), DType.I64),
            ],
        )


def _value(e, bind):
    if isinstance(e, int):
        return e
    v = e.evaluate(bind)
    if v is None:
        raise ValueError(f"cannot evaluate {e}")
    return v


_BOOL_OPS = {"and_": "and", "or_": "or", "sym_and": "and", "sym_or": "or"}


def symbool_to_ir(ex, n: torch.fx.Node, key: str, target: str, val):
    """A node whose value is a SymBool (or a bool) and whose operands are not tensors."""
    args = [ex.env[a] if isinstance(a, torch.fx.Node) else a for a in n.args]
    if key in _COMPARE and len(args) == 2 and all(_is_int(a) for a in args):
        lhs, rhs = (ex.sym(a) if not isinstance(a, int) or isinstance(a, bool) else a for a in args)
        return _fold(SymBool(key, lhs, rhs))
    if key in ("sym_not", "not_") and len(args) == 1 and isinstance(args[0], (SymBool, bool)):
        return (not args[0]) if isinstance(args[0], bool) else SymBool("not", args[0])
    if key in _BOOL_OPS and len(args) == 2 and all(isinstance(a, (SymBool, bool)) for a in args):
        a, b = args
        if isinstance(a, bool) or isinstance(b, bool):
            const, other = (a, b) if isinstance(a, bool) else (b, a)
            if _BOOL_OPS[key] == "and":
                return other if const else False
            return True if const else other
        return SymBool(_BOOL_OPS[key], a, b)
    if isinstance(val, bool):
        return val  # Dynamo decided it: a constant of this graph
    raise Unsupported(f"op {key} ({target}): symbolic {type(val).__name__}")


def _is_int(a) -> bool:
    from ..core.ir import SymExpr

    return isinstance(a, SymExpr) or (isinstance(a, int) and not isinstance(a, bool))


def _fold(b: SymBool):
    """A comparison both sides of which are constants is a Python bool."""
    from ..core.ir import SymExpr

    a = b.lhs.as_const() if isinstance(b.lhs, SymExpr) else b.lhs
    c = b.rhs.as_const() if isinstance(b.rhs, SymExpr) else b.rhs
    if a is not None and c is not None:
        return _COMPARE[b.op](a, c)
    return b
