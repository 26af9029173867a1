"""Symbolic integer expressions for tensor dims: a port of ir/sym_expr.{h,cc} and ir/sym_node.cc.

Note [SymExpr mirror]
The C++ core re-canonicalizes every expression it parses, so the frontend could print any
equivalent form; it mirrors the C++ canonical form exactly instead (the same term order, the same
simplifications from symbol facts, the same printing), so that the text the frontend writes is
what `dg_graph_print` prints back, and golden texts compare byte for byte. Nodes are interned:
structurally equal expressions are the same object, as in C++.
"""
from __future__ import annotations

import functools
from typing import Callable, Mapping

NEG_INF = -(2**63)
POS_INF = 2**63 - 1

# Node kinds, in the C++ enum order (the order decides the structural comparison).
CONST, SYMBOL, SUM, PRODUCT, FLOORDIV, MOD, MAX, MIN = range(8)
_FN_NAMES = {FLOORDIV: "floordiv", MOD: "mod", MAX: "max", MIN: "min"}


class _Node:
    __slots__ = ("kind", "value", "name", "lo", "hi", "divisor", "terms", "factors", "lhs", "rhs",
                 "__weakref__")

    def __init__(self, kind, value=0, name="", lo=NEG_INF, hi=POS_INF, divisor=1, terms=(),
                 factors=(), lhs=None, rhs=None):
        self.kind, self.value, self.name = kind, value, name
        self.lo, self.hi, self.divisor = lo, hi, divisor
        self.terms, self.factors, self.lhs, self.rhs = terms, factors, lhs, rhs


_TABLE: dict[tuple, _Node] = {}  # Note [SymExpr interning]: nodes live for the whole process


def _intern(kind, value=0, name="", lo=NEG_INF, hi=POS_INF, divisor=1, terms=(), factors=(),
            lhs=None, rhs=None) -> _Node:
    key = (kind, value, name, lo, hi, divisor, tuple((c, id(m)) for c, m in terms),
           tuple(id(f) for f in factors), id(lhs) if lhs else 0, id(rhs) if rhs else 0)
    node = _TABLE.get(key)
    if node is None:
        node = _TABLE[key] = _Node(kind, value, name, lo, hi, divisor, terms, factors, lhs, rhs)
    return node


def _cmp(a: int, b: int) -> int:
    return -1 if a < b else (1 if a > b else 0)


def _compare(a: _Node, b: _Node) -> int:
    if a is b:
        return 0
    if a.kind != b.kind:
        return _cmp(a.kind, b.kind)
    if a.kind == CONST:
        return _cmp(a.value, b.value)
    if a.kind == SYMBOL:
        if a.name != b.name:
            return -1 if a.name.encode() < b.name.encode() else 1
        return _cmp(a.lo, b.lo) or _cmp(a.hi, b.hi) or _cmp(a.divisor, b.divisor)
    if a.kind == SUM:
        for (ca, ma), (cb, mb) in zip(a.terms, b.terms):
            c = _compare(ma, mb) or _cmp(ca, cb)
            if c:
                return c
        return _cmp(len(a.terms), len(b.terms)) or _cmp(a.value, b.value)
    if a.kind == PRODUCT:
        for fa, fb in zip(a.factors, b.factors):
            c = _compare(fa, fb)
            if c:
                return c
        return _cmp(len(a.factors), len(b.factors))
    return _compare(a.lhs, b.lhs) or _compare(a.rhs, b.rhs)


_node_key = functools.cmp_to_key(_compare)


def _const(v: int) -> _Node:
    if not NEG_INF <= v <= POS_INF:
        raise OverflowError("symbolic dimension overflow")
    return _intern(CONST, value=v)


def _sum(terms: list[tuple[int, _Node]], constant: int) -> _Node:
    terms = sorted(terms, key=lambda t: _node_key(t[1]))
    return _intern(SUM, value=constant, terms=tuple(terms))


def _product(factors: list[_Node]) -> _Node:
    if len(factors) == 1:
        return factors[0]
    return _intern(PRODUCT, factors=tuple(sorted(factors, key=_node_key)))


# ---- polynomial view ----------------------------------------------------------------------------

def _to_poly(n: _Node) -> tuple[dict, int]:
    if n.kind == CONST:
        return {}, n.value
    if n.kind == SUM:
        return {m: c for c, m in n.terms}, n.value
    return {n: 1}, 0


def _from_poly(terms: dict, constant: int) -> _Node:
    items = [(c, m) for m, c in terms.items() if c != 0]
    if not items:
        return _const(constant)
    if len(items) == 1 and items[0][0] == 1 and constant == 0:
        return items[0][1]
    return _sum(items, constant)


def _factors(n: _Node) -> list[_Node]:
    return list(n.factors) if n.kind == PRODUCT else [n]


# ---- interval arithmetic, saturating at the infinities ------------------------------------------

def _sat(v: int) -> int:
    return POS_INF if v >= POS_INF else (NEG_INF if v <= NEG_INF else v)


def _sat_add(a: int, b: int) -> int:
    if a == NEG_INF or b == NEG_INF:
        return NEG_INF
    if a == POS_INF or b == POS_INF:
        return POS_INF
    return _sat(a + b)


def _sat_mul(a: int, b: int) -> int:
    if a == 0 or b == 0:
        return 0
    neg = (a < 0) != (b < 0)
    if a in (NEG_INF, POS_INF) or b in (NEG_INF, POS_INF):
        return NEG_INF if neg else POS_INF
    return _sat(a * b)


def _iv_mul(a, b):
    c = [_sat_mul(a[0], b[0]), _sat_mul(a[0], b[1]), _sat_mul(a[1], b[0]), _sat_mul(a[1], b[1])]
    return (min(c), max(c))


def _sat_floordiv(a: int, c: int) -> int:
    return a if a in (NEG_INF, POS_INF) else a // c


def _bounds(n: _Node) -> tuple[int, int]:
    k = n.kind
    if k == CONST:
        return (n.value, n.value)
    if k == SYMBOL:
        return (n.lo, n.hi)
    if k == SUM:
        r = (n.value, n.value)
        for c, m in n.terms:
            t = _iv_mul((c, c), _bounds(m))
            r = (_sat_add(r[0], t[0]), _sat_add(r[1], t[1]))
        return r
    if k == PRODUCT:
        r = (1, 1)
        for f in n.factors:
            r = _iv_mul(r, _bounds(f))
        return r
    if k == FLOORDIV:
        if n.rhs.kind == CONST and n.rhs.value > 0:
            a = _bounds(n.lhs)
            return (_sat_floordiv(a[0], n.rhs.value), _sat_floordiv(a[1], n.rhs.value))
        return (NEG_INF, POS_INF)
    if k == MOD:
        b = _bounds(n.rhs)
        if b[0] > 0:
            return (0, POS_INF if b[1] == POS_INF else b[1] - 1)
        return (NEG_INF, POS_INF)
    a, b = _bounds(n.lhs), _bounds(n.rhs)
    if k == MAX:
        return (max(a[0], b[0]), max(a[1], b[1]))
    return (min(a[0], b[0]), min(a[1], b[1]))


def _divisor(n: _Node) -> int:
    import math
    if n.kind == CONST:
        return abs(n.value)
    if n.kind == SYMBOL:
        return n.divisor
    if n.kind == PRODUCT:
        d = 1
        for f in n.factors:
            d = _sat_mul(d, _divisor(f))
        return 1 if d == POS_INF else d
    if n.kind == SUM:
        g = abs(n.value)
        for c, m in n.terms:
            t = _sat_mul(abs(c), _divisor(m))
            g = math.gcd(g, 1 if t == POS_INF else t)
        return g
    return 1


# ---- the public expression type -----------------------------------------------------------------

class SymExpr:
    """An interned canonical integer expression (constant, symbol, or compound)."""

    __slots__ = ("node",)

    def __init__(self, value: "int | _Node" = 0):
        self.node = value if isinstance(value, _Node) else _const(int(value))

    @staticmethod
    def symbol(name: str, lo: int = 0, hi: int = POS_INF, divisor: int = 1) -> "SymExpr":
        if lo > hi:
            raise ValueError(f"symbol {name} has an empty range")
        if divisor < 1:
            raise ValueError(f"symbol {name} has a divisor below 1")
        if lo == hi:
            return SymExpr(lo)
        return SymExpr(_intern(SYMBOL, name=name, lo=lo, hi=hi, divisor=divisor))

    # arithmetic
    def __add__(self, other):
        a, ca = _to_poly(self.node)
        b, cb = _to_poly(_e(other).node)
        a = dict(a)
        for m, c in b.items():
            a[m] = a.get(m, 0) + c
            if a[m] == 0:
                del a[m]
        return SymExpr(_from_poly(a, ca + cb))

    __radd__ = __add__

    def __neg__(self):
        return SymExpr(0) - self

    def __sub__(self, other):
        return self + _e(other) * SymExpr(-1)

    def __rsub__(self, other):
        return _e(other) - self

    def __mul__(self, other):
        pa, ca = _to_poly(self.node)
        pb, cb = _to_poly(_e(other).node)
        out: dict = {}

        def add(mono, coef):
            if coef == 0:
                return
            out[mono] = out.get(mono, 0) + coef
            if out[mono] == 0:
                del out[mono]

        for ma, a in pa.items():
            add(ma, a * cb)
            for mb, b in pb.items():
                add(_product(_factors(ma) + _factors(mb)), a * b)
        for mb, b in pb.items():
            add(mb, b * ca)
        return SymExpr(_from_poly(out, ca * cb))

    __rmul__ = __mul__

    def __eq__(self, other):
        if isinstance(other, int):
            other = SymExpr(other)
        return isinstance(other, SymExpr) and self.node is other.node

    def __hash__(self):
        return id(self.node)

    # queries
    def is_const(self) -> bool:
        return self.node.kind == CONST

    def as_const(self) -> int | None:
        return self.node.value if self.node.kind == CONST else None

    def is_symbol(self) -> bool:
        return self.node.kind == SYMBOL

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def range(self) -> tuple[int, int]:
        return (self.node.lo, self.node.hi)

    @property
    def symbol_divisor(self) -> int:
        return self.node.divisor

    def bounds(self) -> tuple[int, int]:
        return _bounds(self.node)

    def divisor(self) -> int:
        return _divisor(self.node)

    def free_symbols(self) -> list["SymExpr"]:
        out: list[_Node] = []

        def walk(n: _Node):
            if n.kind == SYMBOL:
                if n not in out:
                    out.append(n)
            elif n.kind == SUM:
                for _, m in n.terms:
                    walk(m)
            elif n.kind == PRODUCT:
                for f in n.factors:
                    walk(f)
            elif n.kind != CONST:
                walk(n.lhs)
                walk(n.rhs)

        walk(self.node)
        return [SymExpr(n) for n in out]

    def evaluate(self, bind: "Mapping[str, int] | Callable[[SymExpr], int | None]") -> int | None:
        """Evaluates under a binding from symbol name (or symbol) to value; None if unbound."""
        lookup = bind.get if isinstance(bind, Mapping) else None

        def ev(n: _Node):
            k = n.kind
            if k == CONST:
                return n.value
            if k == SYMBOL:
                return lookup(n.name) if lookup else bind(SymExpr(n))
            if k == SUM:
                r = n.value
                for c, m in n.terms:
                    v = ev(m)
                    if v is None:
                        return None
                    r += c * v
                return r
            if k == PRODUCT:
                r = 1
                for f in n.factors:
                    v = ev(f)
                    if v is None:
                        return None
                    r *= v
                return r
            a, b = ev(n.lhs), ev(n.rhs)
            if a is None or b is None:
                return None
            if k == MAX:
                return max(a, b)
            if k == MIN:
                return min(a, b)
            if b == 0:
                return None
            return a // b if k == FLOORDIV else a % b

        return ev(self.node)

    def substitute(self, replace: Callable[["SymExpr"], "SymExpr"]) -> "SymExpr":
        n = self.node
        if n.kind == CONST:
            return self
        if n.kind == SYMBOL:
            return replace(self)
        if n.kind == SUM:
            r = SymExpr(n.value)
            for c, m in n.terms:
                r = r + SymExpr(c) * SymExpr(m).substitute(replace)
            return r
        if n.kind == PRODUCT:
            r = SymExpr(1)
            for f in n.factors:
                r = r * SymExpr(f).substitute(replace)
            return r
        a, b = SymExpr(n.lhs).substitute(replace), SymExpr(n.rhs).substitute(replace)
        return {FLOORDIV: floordiv, MOD: mod, MAX: sym_max, MIN: sym_min}[n.kind](a, b)

    def __str__(self) -> str:
        return _print(self.node)

    def __repr__(self) -> str:
        return f"SymExpr({_print(self.node)})"


def _e(x) -> SymExpr:
    return x if isinstance(x, SymExpr) else SymExpr(int(x))


def compare(a: SymExpr, b: SymExpr) -> int:
    """Structural total order, independent of creation order."""
    return _compare(a.node, b.node)


# ---- floordiv / mod / max / min -----------------------------------------------------------------

def floordiv(a, b) -> SymExpr:
    a, b = _e(a), _e(b)
    cb = b.as_const()
    if cb == 0:
        raise ZeroDivisionError("symbolic division by zero")
    if cb == 1:
        return a
    ca = a.as_const()
    if ca is not None and cb is not None:
        return SymExpr(ca // cb)
    if ca == 0:
        return a
    if cb is None or cb < 0:
        if a == b and b.bounds()[0] > 0:
            return SymExpr(1)
        return SymExpr(_intern(FLOORDIV, lhs=a.node, rhs=b.node))
    c = cb
    terms, const = _to_poly(a.node)
    whole = {m: k // c for m, k in terms.items() if k % c == 0}
    rest = {m: k for m, k in terms.items() if k % c != 0}
    x = SymExpr(_from_poly(whole, const // c))
    y = SymExpr(_from_poly(rest, const % c))
    lo, hi = y.bounds()
    if lo != NEG_INF and hi != POS_INF and lo // c == hi // c:
        return x + SymExpr(lo // c)
    yn = y.node
    if yn.kind == FLOORDIV and yn.rhs.kind == CONST and yn.rhs.value > 0:
        return x + floordiv(SymExpr(yn.lhs), SymExpr(yn.rhs.value * c))
    return x + SymExpr(_intern(FLOORDIV, lhs=y.node, rhs=b.node))


def mod(a, b) -> SymExpr:
    a, b = _e(a), _e(b)
    cb = b.as_const()
    if cb == 0:
        raise ZeroDivisionError("symbolic modulo by zero")
    if cb in (1, -1):
        return SymExpr(0)
    ca = a.as_const()
    if ca is not None and cb is not None:
        return SymExpr(ca % cb)
    if cb is None or cb < 0:
        if a == b:
            return SymExpr(0)
        return SymExpr(_intern(MOD, lhs=a.node, rhs=b.node))
    c = cb
    terms, const = _to_poly(a.node)
    y = SymExpr(_from_poly({m: k for m, k in terms.items() if k % c != 0}, const % c))
    d = y.divisor()
    if d == 0 or d % c == 0:
        return SymExpr(0)
    lo, hi = y.bounds()
    if lo != NEG_INF and hi != POS_INF and lo // c == hi // c:
        return y - SymExpr((lo // c) * c)
    return SymExpr(_intern(MOD, lhs=y.node, rhs=b.node))


def _min_max(kind: int, a: SymExpr, b: SymExpr) -> SymExpr:
    if a == b:
        return a
    want_max = kind == MAX
    if provably_ge(a, b):
        return a if want_max else b
    if provably_ge(b, a):
        return b if want_max else a
    if compare(a, b) <= 0:
        return SymExpr(_intern(kind, lhs=a.node, rhs=b.node))
    return SymExpr(_intern(kind, lhs=b.node, rhs=a.node))


def sym_max(a, b) -> SymExpr:
    return _min_max(MAX, _e(a), _e(b))


def sym_min(a, b) -> SymExpr:
    return _min_max(MIN, _e(a), _e(b))


def ceildiv(a, b) -> SymExpr:
    return floordiv(_e(a) + _e(b) - 1, b)


def provably_ge(a, b) -> bool:
    try:
        return (_e(a) - _e(b)).bounds()[0] >= 0
    except OverflowError:
        return False


# ---- printing -----------------------------------------------------------------------------------

def _print(n: _Node) -> str:
    k = n.kind
    if k == CONST:
        return str(n.value)
    if k == SYMBOL:
        return n.name
    if k == SUM:
        out = ""
        for i, (c, m) in enumerate(n.terms):
            if i == 0:
                out += "-" + _print(m) if c == -1 else _term(c, m)
            else:
                out += (" - " if c < 0 else " + ") + _term(abs(c), m)
        if n.value > 0:
            out += f" + {n.value}"
        elif n.value < 0:
            out += f" - {-n.value}"
        return out
    if k == PRODUCT:
        return "*".join(_print(f) for f in n.factors)
    return f"{_FN_NAMES[k]}({_print(n.lhs)}, {_print(n.rhs)})"


def _term(c: int, m: _Node) -> str:
    return _print(m) if c == 1 else f"{c}*{_print(m)}"


def bound_str(v: int) -> str:
    return "inf" if v == POS_INF else ("-inf" if v == NEG_INF else str(v))
