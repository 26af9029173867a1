"""Graphs whose symbolic form does not export: symbols tied by Dynamo's guards, or pinned.

Note [Pinned symbols]
Under `torch.compile(dynamic=True)` every input dim is a symbol, head counts and head sizes
too, and Dynamo's guards carry what the graph needs of them: an attention graph multiplies
[s, h*d] by a [64, 64] weight under the guard Eq(h*d, 64); a loss graph slices
hidden[:, -k:] with k an int input and guards that the slice stays inside the tensor. dyngen's
IR knows each symbol's range, not relations between symbols, so such a graph does not export
whole. When the plain export fails (aot.py), this module tries again in two ways, each sound for
every call Dynamo sends to this graph:

1. Replacements from the guards. An equality guard in which some symbol x appears once with
   coefficient +-1 (Eq(s71, s89), Eq(s14 + s55, s38), Eq(s39, 64 // s67)), or with an integer
   coefficient that divides a constant rest (Eq(4*s39, 64) once s67 is pinned to 4), is solved
   for x, and x becomes that expression of the other symbols (the one declared last is
   replaced). Dynamo
   checks the guard on every call, so the replacement holds on every call.
2. Pins. A symbol that is still in the way is fixed to this call's value. The set is found
   greedily among the symbols an argument's dim or a SymInt argument holds whole: pins are added
   rarest first (the fewest tensor dims of the graph), then smallest value (head counts, widths
   and offsets before the token count, which sizes nearly every tensor) until the graph exports,
   then each but the last is dropped again if the graph still exports without it; the
   replacements are recomputed under each trial's pins. Only exports are tried; the chosen one
   is compiled. For the graphs above the pin is the head count, or k; the token count stays
   symbolic. A guess that pins a symbol which then varies is corrected at the call that shows it
   (below): that symbol is never pinned again.
3. Bounds from the guards. An inequality guard that, under the pins and replacements, bounds one
   symbol linearly narrows that symbol's range (hidden[:, -3:] is guarded by s >= 3, which proves
   the slice in range).

A pinned graph checks its pins on every call, from the arguments that hold them. A call whose
pinned values differ exports the graph again with the symbols that changed left free (never
pinned again): if it exports that way, the new variant serves every later call (one compile,
counted and logged); if not, the graph's fallback (its parts as ATen ops, as before pinning
existed) runs from then on, recorded (Note [No silent fallbacks]). There is no variant per value,
so a symbol pinned by mistake costs one compile, never one per step.
"""

from __future__ import annotations

import sympy
import torch
from torch._guards import detect_fake_mode

from .compiled import compile_exported
from .core.ir import IRTypeError
from .counters import record_fallback
from .errors import Unsupported
from .fx.export import SymbolChoices, export
from .fx.values import meta_val, symbol_sources
from .options import log


def _sources(gm) -> dict:
    """sympy symbol -> (argument index, dim or None) of the first argument holding it whole."""
    index = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    return {s: (index[n], d) for s, (n, d) in symbol_sources(gm).items() if n in index}


def _uses(gm) -> dict:
    """sympy symbol -> how many tensor dims of the graph's nodes it appears in."""
    out: dict = {}
    for n in gm.graph.nodes:
        v = meta_val(n)
        for t in v if isinstance(v, (list, tuple)) else [v]:
            for d in t.shape if isinstance(t, torch.Tensor) else ():
                for s in d.node.expr.free_symbols if isinstance(d, torch.SymInt) else ():
                    out[s] = out.get(s, 0) + 1
    return out


def _facts(env) -> list:
    """The guards' relations, conjunctions split; replacements as equalities."""
    out = [sympy.Eq(k, v) for k, v in env.replacements.items()]
    for g in env.guards:
        out += list(g.expr.args) if isinstance(g.expr, sympy.And) else [g.expr]
    return [e for e in out if isinstance(e, sympy.core.relational.Relational)]


def _integers(pins: dict) -> dict:
    # sympy Integers: xreplace of a bare symbol by a Python int returns the int itself
    return {k: sympy.Integer(v) for k, v in pins.items()}


def bounds(facts: list, pins: dict, subst: dict) -> dict:
    """Note [Pinned symbols], 3: {symbol: (lo, hi)} from the inequalities that, under `pins` and
    `subst`, bound a single symbol linearly (-64*s21 + 64*s94 >= 0 with s21 = 3: s94 >= 3)."""
    out: dict = {}
    for f in facts:
        if isinstance(f, (sympy.Eq, sympy.Ne)):
            continue
        diff = sympy.expand((f.lhs - f.rhs).xreplace(_integers(pins)).xreplace(subst))
        if len(diff.free_symbols) != 1:
            continue
        (x,) = diff.free_symbols
        c = diff.coeff(x)
        rest = diff - c * x
        if not (c.is_Integer and c != 0 and rest.is_Integer):
            continue
        if isinstance(f, (sympy.Le, sympy.Lt)):  # c*x + rest <= 0 is -c*x - rest >= 0
            c, rest = -c, -rest
        if isinstance(f, (sympy.Gt, sympy.Lt)):  # > 0 is >= 1 for integers
            rest -= 1
        lo, hi = out.get(x, (None, None))
        if c > 0:  # x >= -rest / c
            v = int(sympy.ceiling(sympy.Rational(-rest, c)))
            lo = v if lo is None else max(lo, v)
        else:  # x <= rest / -c
            v = int(sympy.floor(sympy.Rational(rest, -c)))
            hi = v if hi is None else min(hi, v)
        out[x] = (lo, hi)
    return out


def replacements(equalities: list, pins: dict, order: list) -> dict:
    """Note [Pinned symbols], 1: {symbol: expression}, under `pins`; `order` ranks the symbols
    (the later one is replaced)."""
    rank = {s: i for i, s in enumerate(order)}
    subst: dict = {}
    for eq in equalities:
        diff = sympy.expand((eq.lhs - eq.rhs).xreplace(_integers(pins)).xreplace(subst))
        if diff == 0 or not diff.free_symbols:
            continue
        for x in sorted(diff.free_symbols, key=lambda s: -rank.get(s, len(rank))):
            if x in pins or x in subst:
                continue
            c = diff.coeff(x)
            rest = diff - c * x
            if not c.is_Integer or c == 0 or x in rest.free_symbols:
                continue
            if c not in (1, -1) and not (rest.is_Integer and rest % c == 0):
                continue  # 4*x = 64 gives x = 16; 4*x = y is not an integer for every y
            expr = sympy.simplify(-(diff - c * x) / c)
            subst = {k: v.xreplace({x: expr}) for k, v in subst.items()}
            subst[x] = expr
            break
    return subst


class PinnedGraph:
    """A graph exported under SymbolChoices, with its pins checked on every call."""

    def __init__(self, gm, example_inputs, name, prebuild_archs, fallback):
        self.gm, self.name, self.archs = gm, name, prebuild_archs
        self.fallback = fallback  # () -> the callable that runs when no variant compiles
        env = getattr(detect_fake_mode(example_inputs), "shape_env", None)  # as aot.py finds it
        if env is None:
            raise Unsupported("no symbols to pin")
        self.sources = _sources(gm)
        self.uses = _uses(gm)
        hints = getattr(env, "backed_var_to_val", None) or env.var_to_val
        self.order = [s for s in self.sources if s in hints]
        self.facts = _facts(env)
        self.equalities = [f for f in self.facts if isinstance(f, sympy.Eq)]
        self.example_inputs = example_inputs
        self.varying: set = set()  # symbols seen with two values: never pinned again
        self.fallback_fn = None
        values = {s: int(hints[s]) for s in self.order}
        # The compiled graph, the symbols it pins and their values.
        self.fn, self.pinned = self._search(values)
        self.key = self._key(values)

    def _key(self, values: dict) -> tuple:
        return tuple(values[s] for s in self.pinned)

    def _try(self, pinned: list, values: dict):
        """The graph exported with `pinned` fixed to `values` (and the guards' replacements), or
        None when it does not export that way."""
        pins = {s: values[s] for s in pinned}
        subst = replacements(self.equalities, pins, self.order)
        choices = SymbolChoices(pins, subst, bounds(self.facts, pins, subst))
        try:
            return export(self.gm, self.example_inputs, self.name, choices)
        except (Unsupported, IRTypeError) as e:
            log.debug("%s: pins %s, replacements %s: %s", self.name, pins, subst, e)
            return None

    def _search(self, values: dict):
        """Note [Pinned symbols], 2: the compiled graph and the pinned symbols."""
        exported, pinned = self._try([], values), []
        # Pins are added rarest first, then smallest (head counts, widths and offsets before the
        # token count, which sizes nearly every tensor of the graph), until the graph exports;
        # then each pin but the last is dropped if the graph still exports without it.
        candidates = sorted(
            (s for s in self.order if s not in self.varying),
            key=lambda s: (self.uses.get(s, 0), values[s], self.order.index(s)),
        )
        for s in candidates:
            if exported is not None:
                break
            pinned.append(s)
            exported = self._try(pinned, values)
        if exported is None:
            what = "with the symbols that varied left free" if self.varying else "even pinned"
            raise Unsupported(f"{self.name}: does not export {what}")
        for s in reversed(pinned[:-1]):
            trial = [t for t in pinned if t != s]
            smaller = self._try(trial, values)
            if smaller is not None:
                exported, pinned = smaller, trial
        names = ", ".join(f"{s}={values[s]}" for s in pinned) or "none"
        log.info("%s: exported with symbols pinned (Note [Pinned symbols]): %s", self.name, names)
        return compile_exported(exported, self.example_inputs, self.name, self.archs), pinned

    def __call__(self, *args):
        if self.fallback_fn is not None:
            return self.fallback_fn(*args)
        values = {s: _value_of(args, self.sources[s]) for s in self.pinned}
        if self._key(values) != self.key:
            return self._new_variant(args, values)(*args)
        return self.fn(*args)

    def _new_variant(self, args, values: dict):
        self.varying |= {s for s, v in zip(self.pinned, self.key) if values[s] != v}
        all_values = {s: _value_of(args, self.sources[s]) for s in self.order}
        log.info("%s: pinned symbols changed (%s): exported again", self.name, values)
        try:
            fn, pinned = self._search(all_values)
        except Unsupported as e:
            # No variant per value (a token count pinned by mistake would compile at every
            # step): the graph's fallback runs from now on, recorded.
            self.fallback_fn = self.fallback()
            record_fallback(
                self.name, f"{e} (Note [Pinned symbols])", what="runs in part or whole as ATen ops"
            )
            return self.fallback_fn
        self.fn, self.pinned = fn, pinned
        self.key = self._key(all_values)
        return fn


def _value_of(args, source) -> int:
    i, d = source
    return int(args[i]) if d is None else int(args[i].shape[d])
