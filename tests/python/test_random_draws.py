"""Note [Random numbers] (random_draws.py): a graph that draws random numbers compiles as one
dyngen region with the draws made first by PyTorch's generator, so results equal eager PyTorch's
under the same seed, forward and backward, for every size, without a fallback."""

import torch

import dyngen
import dyngen.aot


def _router_noise(x, w):
    """Phi-3.5-MoE's sparsemixer and input jitter, in small: every draw kind it makes."""
    h = x * torch.empty_like(x).uniform_(0.99, 1.01)
    scores = h @ w.t()
    gumbel = scores - torch.empty_like(scores).exponential_().log()
    keep = torch.rand_like(scores[:, :1]).uniform_() > 0.25
    return torch.where(keep, gumbel.softmax(-1), scores.sigmoid()) * 2


def test_draws_match_eager_under_one_seed_without_a_fallback(fresh):
    compiled = torch.compile(_router_noise, backend=dyngen.aot.backend, dynamic=True)
    w = torch.randn(5, 8, requires_grad=True)
    for n in (3, 6, 11):
        x = torch.randn(n, 8, requires_grad=True)
        xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        torch.manual_seed(100 + n)
        got = compiled(x, w)
        torch.manual_seed(100 + n)
        want = _router_noise(xr, wr)
        torch.testing.assert_close(got, want, msg=lambda m: f"n={n}: {m}")
        g = torch.autograd.grad(got.square().sum(), [x, w])
        e = torch.autograd.grad(want.square().sum(), [xr, wr])
        for a, b in zip(g, e):
            torch.testing.assert_close(a, b, msg=lambda m: f"n={n} grad: {m}")
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    assert s["graphs_where"]["partial"] == 0 and s["graphs_where"]["aten"] == 0, s
    assert s["ops_where"]["rng"] == 4 and s["ops_where"]["aten"] == 0, s["ops_where"]
    assert s["ops_where"]["dyngen"] >= 10 and "emulate" in s["executor"].split("+"), s
    assert s["backend_calls"] == 1, s


def test_the_generator_ends_where_eager_leaves_it(fresh):
    compiled = torch.compile(_router_noise, backend=dyngen.aot.backend, dynamic=True)
    w = torch.randn(5, 8)
    for n in (3, 7):
        x = torch.randn(n, 8)
        torch.manual_seed(7)
        compiled(x, w)
        after_compiled = torch.rand(3)
        torch.manual_seed(7)
        _router_noise(x, w)
        assert torch.equal(after_compiled, torch.rand(3))


def test_a_value_dependent_draw_is_not_hoisted_and_is_reported(fresh):
    """bernoulli(p) reads p's values: nothing moves (moving only some draws would reorder the
    stream); the graph runs in parts and says why."""
    from dyngen.options import options, set_options

    def f(x):
        return torch.bernoulli(x.sigmoid()) * x + torch.rand_like(x)

    old = options().strict
    set_options(strict=False)
    try:
        compiled = torch.compile(f, backend=dyngen.aot.backend, dynamic=True)
        for n in (3, 6):
            x = torch.randn(n, 4)
            torch.manual_seed(3)
            got = compiled(x)
            torch.manual_seed(3)
            torch.testing.assert_close(got, f(x))
    finally:
        set_options(strict=old)
    s = dyngen.stats()
    assert s["ops_where"]["rng"] == 0
    reasons = " ".join(fb["reason"] for fb in s["fallbacks"])
    assert "bernoulli" in reasons, reasons


def _jitter_then_attention(x):
    """DBRX's router jitter beside an attention: CPU SDPA lowers to an ATen op tagged as seeded
    (for its dropout), called here with dropout_p = 0, so it draws nothing."""
    q = x * torch.empty_like(x).uniform_(0.99, 1.01)
    return torch.nn.functional.scaled_dot_product_attention(
        q[None, None], x[None, None], x[None, None], is_causal=True, scale=0.35
    )[0, 0]


def test_attention_without_dropout_does_not_block_the_hoist(fresh):
    compiled = torch.compile(_jitter_then_attention, backend=dyngen.aot.backend, dynamic=True)
    for n in (3, 6):
        x = torch.randn(n, 8)
        torch.manual_seed(5)
        got = compiled(x)
        torch.manual_seed(5)
        torch.testing.assert_close(got, _jitter_then_attention(x), msg=lambda m: f"n={n}: {m}")
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    assert s["ops_where"]["rng"] == 1 and s["ops_where"]["aten"] == 0, s["ops_where"]
