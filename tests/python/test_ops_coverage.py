"""The ops added for ThunderFX coverage, each through AOTAutograd (forward and, where
differentiable, backward ATen graphs exported and run by dyngen) for several symbolic sizes,
against eager PyTorch; every case must compile without a fallback, and the last size must not
compile anything new."""

import operator

import pytest
import torch
import torch.nn.functional as F

import dyngen
import dyngen.aot

SIZES = (3, 6, 11)


def _check(fn, make_args, grad=True, dtype_tol=None, sizes=SIZES):
    compiled = torch.compile(fn, backend=dyngen.aot.backend, dynamic=True)
    calls = []
    for n in sizes:
        calls.append(dyngen.stats()["backend_calls"])
        args = make_args(n)
        ref = [
            a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
            for a in args
        ]
        got, want = compiled(*args), fn(*ref)
        tol = dtype_tol or {}
        torch.testing.assert_close(got, want, **tol, msg=lambda m: f"n={n}: {m}")
        if grad:
            diff = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
            diff_ref = [a for a in ref if isinstance(a, torch.Tensor) and a.requires_grad]
            g = torch.autograd.grad(got.float().square().sum(), diff)
            w = torch.autograd.grad(want.float().square().sum(), diff_ref)
            for a, e in zip(g, w):
                torch.testing.assert_close(a, e, **tol, msg=lambda m: f"n={n} grad: {m}")
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    assert calls[-1] == s["backend_calls"] >= 1, (calls, s)  # nothing new after warm-up


def _x(*shape, dtype=torch.float32, grad=True):
    def make(n):
        return torch.randn(*[n if d == "n" else d for d in shape]).to(dtype).requires_grad_(grad)

    return make


BF16 = {"atol": 2e-2, "rtol": 2e-2}


@pytest.mark.parametrize("op", [torch.sin, torch.cos, torch.erf, torch.sinc])
def test_unary_trig_erf_sinc(fresh, op):
    # sinc's gradient (cos(pi x) - sinc(x)) / x cancels: f32 ulps of the parts show up relatively.
    tol = {"atol": 1e-4, "rtol": 1e-4} if op is torch.sinc else None
    _check(lambda x: op(x) * 2, lambda n: [_x("n", 5)(n)], dtype_tol=tol)


def test_sinc_at_zero_and_integers(fresh):
    _check(
        lambda x, k: torch.sinc(x.relu() * 0) + torch.sin(k) + torch.cos(k) * x,
        lambda n: [_x("n", 3)(n), torch.randint(-3, 3, (n, 3))],
    )


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gelu_and_its_backward(fresh, approximate, dtype):
    _check(
        lambda x: F.gelu(x, approximate=approximate),
        lambda n: [_x("n", 7, dtype=dtype)(n)],
        dtype_tol=BF16 if dtype == torch.bfloat16 else None,
    )


def test_select_and_select_backward(fresh):
    """DBRX's sliced expert weights: w.view(E, ffn, -1)[e] (aten.select.int), forward and
    backward (select_backward); the weight is a parameter, so its shape is static."""

    class Experts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3 * 4, 6))

        def forward(self, x):
            e = self.w.view(3, 4, -1)[1]
            return x @ e.t() + self.w.view(3, 4, -1)[-1].sum(1)

    model = Experts()
    compiled = torch.compile(model, backend=dyngen.aot.backend, dynamic=True)
    for n in SIZES:
        x = torch.randn(n, 6, requires_grad=True)
        got, want = compiled(x), model(x)
        torch.testing.assert_close(got, want)
        gw = torch.autograd.grad(got.square().sum(), [model.w, x])
        ww = torch.autograd.grad(want.square().sum(), [model.w, x])
        for a, e in zip(gw, ww):
            torch.testing.assert_close(a, e)
    assert dyngen.stats()["fallbacks"] == []


def test_index_put_with_and_without_accumulate(fresh):
    def f(x, idx, v):
        a = torch.ops.aten.index_put(x, [idx], v, accumulate=True)
        b = torch.ops.aten.index_put(x, [idx], v * 2, accumulate=False)
        return a + b

    def args(n):
        idx = torch.randperm(n)[: max(n // 2, 2)]  # distinct: index_put's write order is free
        return [_x("n", 4)(n), idx, torch.randn(idx.numel(), 4, requires_grad=True)]

    _check(f, args)


def test_arange(fresh):
    def f(x):
        n = x.shape[0]
        pos = torch.arange(n)
        return (
            x * torch.arange(1, n + 1, dtype=torch.float32)[:, None]
            + pos[:, None]
            + torch.arange(2, 2 * n + 2, 2)[:, None]
        )

    _check(f, lambda n: [_x("n", 3)(n)])


def test_cumsum(fresh):
    _check(
        lambda x, m: torch.cumsum(x, 0) + torch.cumsum(m, 0)[:, None],
        lambda n: [_x("n", 4)(n), torch.rand(n) > 0.5],
    )


def test_clamp_and_where_with_scalars(fresh):
    def f(x):
        y = torch.clamp(x, min=-0.5, max=0.7) + x.clamp_min(0.1) - x.clamp(max=0.2)
        return torch.where(x > 0, y, 0.25) + torch.where(x < 0.3, 1.0, x)

    _check(f, lambda n: [_x("n", 5)(n)])


def test_constant_pad_nd(fresh):
    def f(x):
        return F.pad(x, (1, 2, 0, 3), value=0.5).sum(0) + F.pad(x, (-1, 2))[:, :4].sum()

    _check(f, lambda n: [_x("n", 5)(n)])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_nll_loss(fresh, reduction):
    weight = torch.rand(7) + 0.5

    def f(logits, target):
        return F.cross_entropy(logits, target, reduction=reduction, ignore_index=2) + F.nll_loss(
            logits.log_softmax(-1), target, weight=weight, reduction=reduction
        )

    def args(n):
        return [_x("n", 7)(n), torch.randint(0, 7, (n,))]

    _check(f, args)


def test_symbolic_comparison_in_graph(fresh):
    """A SymBool (s0 > 4) used as data: it must not make the graph fall back."""

    def f(x):
        n = x.shape[0]
        big = operator.gt(n, 4)
        return x * torch.where(torch.tensor(big), 2.0, 3.0) + (n > 6)

    _check(f, lambda n: [_x("n", 3)(n)], sizes=(3, 5, 9))


def test_float16_end_to_end(fresh):
    w = (torch.randn(6, 5) * 0.3).half().requires_grad_(True)

    def f(x, w):
        return F.silu(x @ w.t()).sum(-1) + x.float().square().mean(-1).half()

    _check(
        f, lambda n: [_x("n", 5, dtype=torch.float16)(n), w], dtype_tol={"atol": 5e-3, "rtol": 5e-3}
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_norm_and_its_backward(fresh, dtype):
    """native_layer_norm and its backward decompose (Note [Decompositions]) into catalog ops and
    var_mean, which fx/nn_ops.py computes in f32 for bf16 as PyTorch does."""
    ln = torch.nn.LayerNorm(12).to(dtype)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.5, 0.5)
    _check(
        lambda x: ln(x) * 2,
        lambda n: [_x("n", 12, dtype=dtype)(n)],
        dtype_tol=BF16 if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-4},
    )


def test_masked_fill_and_var_mean(fresh):
    """masked_fill (decomposed to where), forward and backward; var_mean over the symbolic dim
    with and without a correction, forward only: its gradient's 2 / n is a symbolic float,
    which the exporter does not take (layer norm's backward decomposes without one)."""
    _check(
        lambda x, m: x.masked_fill(m, -1.5) * x, lambda n: [_x("n", 5)(n), torch.rand(n, 5) > 0.5]
    )

    def g(x):
        v0, m0 = torch.var_mean(x, dim=0, correction=0)
        v1, m1 = torch.var_mean(x, dim=0, keepdim=True)
        return x + v0 + m0 + v1 * m1

    _check(
        g, lambda n: [_x("n", 5, grad=False)(n)], grad=False, dtype_tol={"atol": 1e-5, "rtol": 1e-4}
    )


def test_split_with_sizes_vector_norm_and_sgn(fresh):
    """DBRX's ops: split_with_sizes (its attention), linalg_vector_norm with ord 1 and 2 (the
    router normalizes expert weights), whose ord-1 gradient uses sgn."""

    def f(x, w):
        a, b, rest = torch.split(x, [2, 3, 4], dim=1)
        l1 = torch.linalg.vector_norm(x, ord=1, dim=-1, keepdim=True)
        l2 = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        return torch.cat([rest * l1, a.sign() + b.sum(1, keepdim=True), x / l2], 1) @ w

    _check(
        f,
        lambda n: [_x("n", 9)(n), torch.randn(15, 3, requires_grad=True)],
        dtype_tol={"atol": 1e-4, "rtol": 1e-4},
    )
