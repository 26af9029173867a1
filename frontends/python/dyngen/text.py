"""Parser for the IR text form (Note [IR text form] in ir/text_format.h).

`parse_graph_text(print_graph(g))` rebuilds g; printing again gives the same text. The reference
executor runs graphs from their text, so everything the frontend hands to the core goes through
this form and export fidelity is tested end to end.
"""
from __future__ import annotations

import re

from .ir import Graph, GraphBuilder, IRTypeError, SymList, TensorType
from .ops import DType
from .symbolic import NEG_INF, POS_INF, SymExpr, floordiv, mod, sym_max, sym_min

_FLOAT = r"\d+(?:\.\d*)?(?:e[+-]?\d+)?"
_TOKEN = re.compile(r"\s*(?:(" + _FLOAT + r")|([A-Za-z_][A-Za-z0-9_]*)|(%[A-Za-z0-9_?]+)|(.))")
_FUNCS = {"floordiv": floordiv, "mod": mod, "max": sym_max, "min": sym_min}


class ParseError(ValueError):
    pass


class _Lexer:
    def __init__(self, text: str):
        self.toks = []
        for m in _TOKEN.finditer(text):
            if m.group(0).strip():
                self.toks.append(m.group(0).strip())
        self.i = 0

    def peek(self, k: int = 0) -> str | None:
        return self.toks[self.i + k] if self.i + k < len(self.toks) else None

    def next(self) -> str:
        t = self.peek()
        if t is None:
            raise ParseError("unexpected end of line")
        self.i += 1
        return t

    def expect(self, t: str) -> None:
        got = self.next()
        if got != t:
            raise ParseError(f"expected '{t}', got '{got}'")

    def done(self) -> bool:
        return self.i >= len(self.toks)


def _parse_expr(lx: _Lexer, syms: dict[str, SymExpr]) -> SymExpr:
    e = _parse_term(lx, syms)
    while lx.peek() in ("+", "-"):
        op = lx.next()
        t = _parse_term(lx, syms)
        e = e + t if op == "+" else e - t
    return e


def _parse_term(lx, syms) -> SymExpr:
    e = _parse_unary(lx, syms)
    while lx.peek() == "*":
        lx.next()
        e = e * _parse_unary(lx, syms)
    return e


def _parse_unary(lx, syms) -> SymExpr:
    if lx.peek() == "-":
        lx.next()
        return -_parse_unary(lx, syms)
    t = lx.next()
    if t.isdigit():
        return SymExpr(int(t))
    if t == "(":
        e = _parse_expr(lx, syms)
        lx.expect(")")
        return e
    if t in _FUNCS and lx.peek() == "(":
        lx.next()
        a = _parse_expr(lx, syms)
        lx.expect(",")
        b = _parse_expr(lx, syms)
        lx.expect(")")
        return _FUNCS[t](a, b)
    if t in syms:
        return syms[t]
    raise ParseError(f"undeclared symbol '{t}'")


def _parse_type(lx: _Lexer, syms) -> TensorType:
    name = lx.next()
    dtype = DType.from_text(name)
    if dtype is None:
        raise ParseError(f"unknown dtype '{name}'")
    lx.expect("[")
    shape = []
    while lx.peek() != "]":
        shape.append(_parse_expr(lx, syms))
        if lx.peek() == ",":
            lx.next()
    lx.expect("]")
    return TensorType(dtype, tuple(shape))


def _parse_number(lx: _Lexer) -> int | float:
    sign = lx.next() if lx.peek() == "-" else ""
    tok = lx.next()
    if tok in ("inf", "nan"):
        return float(sign + tok)
    if tok.isdigit():
        return int(sign + tok)
    if re.fullmatch(_FLOAT, tok) is None:
        raise ParseError(f"bad number '{sign + tok}'")
    return float(sign + tok)


def _parse_attr_value(lx: _Lexer, syms):
    t = lx.peek()
    if t == "sym" and lx.peek(1) == "[":
        lx.next()
        lx.next()
        items = []
        while lx.peek() != "]":
            items.append(_parse_expr(lx, syms))
            if lx.peek() == ",":
                lx.next()
        lx.expect("]")
        return SymList(items)
    if t == "[":
        lx.next()
        items = []
        while lx.peek() != "]":
            v = _parse_number(lx)
            if not isinstance(v, int):
                raise ParseError("integer lists hold integers")
            items.append(v)
            if lx.peek() == ",":
                lx.next()
        lx.expect("]")
        return tuple(items)
    if t is not None and DType.from_text(t) is not None:
        lx.next()
        return DType.from_text(t)
    return _parse_number(lx)


def _bound(tok: str) -> int:
    return POS_INF if tok == "inf" else (NEG_INF if tok == "-inf" else int(tok))


def parse_graph_text(text: str) -> Graph:
    """Parses and type-checks the text form; raises ParseError("line N: message")."""
    b: GraphBuilder | None = None
    syms: dict[str, SymExpr] = {}
    names: dict[str, int] = {}
    saw_output = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            if line.startswith("graph "):
                m = re.fullmatch(r"graph @(\S+)", line)
                if not m or b is not None:
                    raise ParseError("bad or repeated graph header")
                b = GraphBuilder(m.group(1))
                continue
            if b is None:
                raise ParseError("expected 'graph @name' first")
            if saw_output:
                raise ParseError("nothing may follow the output line")
            if line.startswith("sym "):
                m = re.fullmatch(r"sym (\w+) in \[(-?\w+), (-?\w+)\] div (\d+)", line)
                if not m:
                    raise ParseError("expected 'sym NAME in [LO, HI] div D'")
                if m.group(1) in syms:
                    raise ParseError(f"symbol {m.group(1)} declared twice")
                syms[m.group(1)] = b.symbol(m.group(1), _bound(m.group(2)), _bound(m.group(3)),
                                            int(m.group(4)))
                continue
            if line.startswith("input "):
                lx = _Lexer(line[len("input "):])
                name = lx.next()
                lx.expect(":")
                if lx.peek() == "sym":
                    lx.next()
                    vid = b.sym_input(_parse_expr(lx, syms))
                else:
                    t = _parse_type(lx, syms)
                    vid = b.input(t.dtype, t.shape)
                _define(names, name, vid)
                if not lx.done():
                    raise ParseError(f"unexpected '{lx.peek()}'")
                continue
            if line.startswith("output"):
                lx = _Lexer(line[len("output"):])
                while not lx.done():
                    b.output(_use(names, lx.next()))
                    if lx.peek() == ",":
                        lx.next()
                saw_output = True
                continue
            lx = _Lexer(line)
            name = lx.next()
            lx.expect(":")
            declared = _parse_type(lx, syms)
            lx.expect("=")
            op = lx.next()
            lx.expect("(")
            ins = []
            while lx.peek() != ")":
                ins.append(_use(names, lx.next()))
                if lx.peek() == ",":
                    lx.next()
            lx.expect(")")
            attrs = {}
            if lx.peek() == "{":
                lx.next()
                while lx.peek() != "}":
                    key = lx.next()
                    lx.expect("=")
                    attrs[key] = _parse_attr_value(lx, syms)
                    if lx.peek() == ",":
                        lx.next()
                lx.expect("}")
            if not lx.done():
                raise ParseError(f"unexpected '{lx.peek()}'")
            vid = b.op(op, ins, attrs)
            if b.graph.values[vid].type != declared:
                raise ParseError(f"declared type {declared} but the op gives "
                                 f"{b.graph.values[vid].type}")
            _define(names, name, vid)
        except (ParseError, IRTypeError, ValueError) as e:
            raise ParseError(f"line {lineno}: {e}") from None
    if b is None or not saw_output or not b.graph.outputs:
        raise ParseError("graph has no outputs")
    return b.finish()


def _define(names: dict, name: str, vid: int) -> None:
    if not name.startswith("%"):
        raise ParseError(f"expected a value name, got '{name}'")
    if name in names:
        raise ParseError(f"{name} defined twice")
    names[name] = vid


def _use(names: dict, name: str) -> int:
    if name not in names:
        raise ParseError(f"{name} is used before it is defined")
    return names[name]
