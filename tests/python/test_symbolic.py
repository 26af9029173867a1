"""Symbolic dims: canonical form, printing as the C++ core prints, and property tests."""
import hashlib
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import REPO

from dyngen.ir import SymList
from dyngen.symbolic import (POS_INF, SymExpr, ceildiv, floordiv, mod, provably_ge, sym_max,
                             sym_min)
from dyngen.text import _Lexer, _parse_expr


def test_canonical_form_and_interning():
    s = SymExpr.symbol("s0", 2)
    t = SymExpr.symbol("s1", 2)
    assert (s + 1) + s == 2 * s + 1
    assert ((s + t) * 2).node is (2 * t + 2 * s).node  # interned: one object per expression
    assert str(s * t - 2 * s + 3) == "-2*s0 + s0*s1 + 3"
    assert str(-s + 3) == "-s0 + 3"
    assert str(s - s) == "0"
    assert SymExpr.symbol("k", 4, 4) == 4  # one possible value: a constant


def test_floordiv_mod_use_facts():
    s = SymExpr.symbol("s0", 2)
    small = SymExpr.symbol("k", 0, 15)
    assert str(floordiv(4 * s + 3, 2)) == "2*s0 + 1"
    assert floordiv(small, 16) == 0
    assert mod(8 * s, 4) == 0
    assert str(floordiv(floordiv(s, 2), 3)) == "floordiv(s0, 6)"
    assert str(ceildiv(s, 4)) == "floordiv(s0 + 3, 4)"
    assert sym_max(s, 1) == s and sym_min(s, 1) == 1  # s >= 2
    aligned = SymExpr.symbol("a", 0, POS_INF, 16)
    assert mod(aligned, 8) == 0


def _random_expr(rng, syms, depth):
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.4:
            k = rng.randint(-5, 9)
            return SymExpr(k), (lambda env, k=k: k)
        s = rng.choice(syms)
        return s, (lambda env, n=s.name: env[n])
    a, fa = _random_expr(rng, syms, depth - 1)
    b, fb = _random_expr(rng, syms, depth - 1)
    op = rng.choice(["+", "-", "*", "fd", "mod", "max", "min"])
    if op in ("fd", "mod"):
        c = rng.randint(1, 8)
        if op == "fd":
            return floordiv(a, c), (lambda env: fa(env) // c)
        return mod(a, c), (lambda env: fa(env) % c)
    table = {"+": (lambda: a + b, lambda env: fa(env) + fb(env)),
             "-": (lambda: a - b, lambda env: fa(env) - fb(env)),
             "*": (lambda: a * b, lambda env: fa(env) * fb(env)),
             "max": (lambda: sym_max(a, b), lambda env: max(fa(env), fb(env))),
             "min": (lambda: sym_min(a, b), lambda env: min(fa(env), fb(env)))}
    build, ev = table[op]
    return build(), ev


@pytest.mark.parametrize("seed", range(4))
def test_property_evaluate_bounds_print_parse(seed):
    rng = random.Random(seed)
    syms = [SymExpr.symbol("s0", 2), SymExpr.symbol("s1", 0, 40),
            SymExpr.symbol("s2", 1, POS_INF, 4)]
    table = {s.name: s for s in syms}
    for i in range(150):
        e, ev = _random_expr(rng, syms, 4)
        text = str(e)
        again = _parse_expr(_Lexer(text), table)
        assert again == e, f"seed {seed} #{i}: {text} reparses as {again}"
        assert str(again) == text
        lo, hi = e.bounds()
        for _ in range(5):
            env = {"s0": rng.randint(2, 300), "s1": rng.randint(0, 40),
                   "s2": 4 * rng.randint(1, 50)}
            want = ev(env)
            assert e.evaluate(env) == want, f"seed {seed} #{i}: {text} at {env}"
            assert lo <= want <= hi, f"seed {seed} #{i}: {text} = {want} outside [{lo}, {hi}]"
            assert provably_ge(e, lo) if lo > -2**62 else True


def test_symlist_prints_like_the_core():
    from dyngen.ir import print_attr_value
    s = SymExpr.symbol("s0", 2)
    assert print_attr_value(SymList([s, SymExpr(2048)])) == "sym[s0, 2048]"
    assert print_attr_value((1, 0)) == "[1, 0]"


def _prefix_expr(rng, depth):
    """A random expression as (prefix text for the C++ oracle, Python SymExpr)."""
    syms = {"s0": SymExpr.symbol("s0", 2), "s1": SymExpr.symbol("s1", 0, 40),
            "s2": SymExpr.symbol("s2", 1, POS_INF, 4)}
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.4:
            k = rng.randint(-6, 12)
            return str(k), SymExpr(k)
        name = rng.choice(sorted(syms))
        return name, syms[name]
    op = rng.choice(["add", "sub", "mul", "floordiv", "mod", "max", "min"])
    ta, a = _prefix_expr(rng, depth - 1)
    if op in ("floordiv", "mod"):
        k = rng.choice([1, 2, 3, 4, 8, 16, -2])
        tb, b = str(k), SymExpr(k)
    else:
        tb, b = _prefix_expr(rng, depth - 1)
    fn = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
          "floordiv": lambda: floordiv(a, b), "mod": lambda: mod(a, b),
          "max": lambda: sym_max(a, b), "min": lambda: sym_min(a, b)}[op]
    return f"( {op} {ta} {tb} )", fn()


def _oracle() -> Path:
    """Builds tests/python/oracle/symexpr_oracle.cc against ir/sym_expr.cc (cached by hash)."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    sources = [REPO / "ir" / "sym_expr.cc", REPO / "ir" / "sym_node.cc",
               Path(__file__).parent / "oracle" / "symexpr_oracle.cc"]
    h = hashlib.sha256(b"".join(p.read_bytes() for p in sources + [REPO / "ir" / "sym_expr.h",
                                                                    REPO / "ir" / "sym_node.h"]))
    exe = Path(tempfile.gettempdir()) / f"dyngen-symexpr-oracle-{h.hexdigest()[:16]}"
    if not exe.exists():
        tmp = exe.with_suffix(".tmp")
        subprocess.run([cxx, "-std=c++17", "-O1", f"-I{REPO}", *map(str, sources), "-o", str(tmp)],
                       check=True, capture_output=True)
        tmp.rename(exe)
    return exe


def test_python_symexpr_mirrors_the_cpp_core():
    """Note [SymExpr mirror]: the same expressions print, bound and divide identically in C++."""
    rng = random.Random(1234)
    cases = [_prefix_expr(rng, 4) for _ in range(400)]
    out = subprocess.run([str(_oracle())], input="\n".join(t for t, _ in cases) + "\n",
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == len(cases)
    for (text, e), line in zip(cases, out):
        lo, hi = e.bounds()
        assert line == f"{e} | {lo} {hi} | {e.divisor()}", f"{text}"
