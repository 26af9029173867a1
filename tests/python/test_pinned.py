"""Note [Pinned symbols]: under dynamic=True every input dim is a symbol, and graphs that need
Dynamo's guards to type (a head count times a head size equal to a weight's 64; a slice hidden[:,
-k:] kept inside the tensor by a guard) fell back to ATen in part. They now compile
whole: the guards' equalities replace symbols, and what still blocks the export is pinned to the
call's value, checked on every call."""

import pytest
import sympy
import torch

import dyngen
import dyngen.aot
from dyngen.options import options, set_options
from dyngen.pinned import bounds, replacements

a, b, c, d = sympy.symbols("a b c d", integer=True, positive=True)


def test_replacements_solve_each_equality_for_its_last_symbol():
    order = [a, b, c, d]
    subst = replacements([sympy.Eq(a + b, c), sympy.Eq(d, sympy.floor(64 / b))], {}, order)
    assert subst == {c: a + b, d: sympy.floor(64 / b)}
    # A pin turns a guard into a value for the other symbol; a product is not solved for.
    assert replacements([sympy.Eq(a + b, c)], {a: 0}, order) == {c: b}
    assert replacements([sympy.Eq(a * b, 64)], {}, order) == {}
    assert replacements([sympy.Eq(a * b, 64)], {a: 4}, order) == {b: 16}


class HeadsThenKeep(torch.nn.Module):
    """The two OLMoE graphs that fell back: attention heads merged into a Linear's 64 features
    (h*d = 64 only by a guard), then the last `keep` positions (keep = 0: all of them)."""

    def __init__(self):
        super().__init__()
        self.o = torch.nn.Linear(64, 64, bias=False)
        self.head = torch.nn.Linear(64, 32, bias=False)

    def forward(self, attn, keep: int):
        bsz, h, s, dh = attn.shape
        y = self.o(attn.transpose(1, 2).reshape(bsz, s, h * dh))
        torch._dynamo.graph_break()
        return self.head(y[:, -keep:, :]).float().square().mean(-1)


@pytest.mark.parametrize("keep", [0, 3])
def test_guarded_graphs_compile_whole_under_dynamic_true(fresh, keep):
    torch.manual_seed(0)
    model = HeadsThenKeep()
    compiled = torch.compile(model, backend=dyngen.aot.backend, dynamic=True)
    for s in (9, 12, 17):  # the pins hold; the token count stays symbolic
        attn = torch.randn(1, 4, s, 16, requires_grad=True)
        got = compiled(attn, keep)
        got.sum().backward()
        g_got, attn.grad = attn.grad, None
        want = model(attn, keep)
        want.sum().backward()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(g_got, attn.grad, rtol=1e-4, atol=1e-4)
        if s == 9:
            warm = dyngen.stats()["graphs_compiled"]
    st = dyngen.stats()
    assert st["fallbacks"] == [], st["fallbacks"]  # DYNGEN_STRICT=1 raises on one anyway
    assert st["graphs_compiled"] == warm, st  # new token counts compile nothing
    assert st["graphs_where"]["aten"] == 0 and st["graphs_where"]["partial"] == 0, st


def test_a_pinned_head_count_that_changes_runs_the_recorded_fallback(fresh):
    torch.manual_seed(0)
    model = HeadsThenKeep()
    compiled = torch.compile(model, backend=dyngen.aot.backend, dynamic=True)
    strict = options().strict
    set_options(strict=False)  # the fallback is the behaviour under test
    try:
        for h in (4, 4, 8, 2):
            attn = torch.randn(1, h, 10, 64 // h)
            torch.testing.assert_close(compiled(attn, 0), model(attn, 0), rtol=1e-4, atol=1e-4)
            if h == 8:
                assert dyngen.stats()["fallbacks"] == [], "a head count of 4 twice: no fallback"
    finally:
        set_options(strict=strict)
    # Dynamo's guard h * d == 64 still holds for 8 heads, so Dynamo does not recompile; the pins'
    # check notices, the graph cannot leave h free, and its fallback runs, recorded once.
    fallbacks = dyngen.stats()["fallbacks"]
    assert len(fallbacks) == 1 and "Pinned symbols" in fallbacks[0]["reason"], fallbacks


def test_bounds_from_inequalities_under_pins():
    facts = [sympy.Ge(-64 * a + 64 * b, 0), sympy.Gt(c, 5), sympy.Le(2 * d, 9), sympy.Ge(a * b, 3)]
    assert bounds(facts, {a: 3}, {}) == {b: (3, None), c: (6, None), d: (None, 4)}
    assert bounds(facts, {}, {}) == {c: (6, None), d: (None, 4)}  # two symbols: no bound


def test_a_guard_on_a_pinned_symbol_alone():
    # Eq(a, 4) with a pinned: a bare symbol replaced by its value (an int before sympy's Integer)
    assert replacements([sympy.Eq(a, 4), sympy.Eq(a + b, c)], {a: 4}, [a, b, c]) == {c: b + 4}
    assert bounds([sympy.Ge(a, 2), sympy.Ge(b, 2)], {a: 4}, {}) == {b: (2, None)}
