"""The selection ops MoE routers use (dyngen/fx/select_ops.py): gather, scatter with a value and
with a tensor, scatter_add, max along a dim, topk, and the triu/tril masks, forward and backward
through AOTAutograd for several symbolic sizes, against eager PyTorch: no fallback, nothing
compiled after warm-up."""

import pytest
import torch
import torch.nn.functional as F
from test_ops_coverage import BF16, _check, _x

import dyngen
import dyngen.aot


def _distinct_columns(n, cols, k):
    """[n, k] indices, distinct within each row (scatter's write order is free for repeats)."""
    return torch.argsort(torch.rand(n, cols), dim=1)[:, :k]


def test_gather_scatter_and_scatter_add(fresh):
    """gather's gradient is scatter_add (repeated indices accumulate), scatter.value's and
    scatter.src's gradients are scatter and gather."""

    def f(x, idx, dup, v):
        picked = x.gather(1, idx) * 2
        placed = x.scatter(1, idx, 0.5) + x.scatter(1, idx, v)
        summed = torch.zeros_like(x).scatter_add(1, dup, x[:, :4] * 3)
        return placed + summed + picked.sum(1, keepdim=True) + x.gather(1, dup).sum(1, True)

    def args(n):
        return [
            _x("n", 6)(n),
            _distinct_columns(n, 6, 2),
            torch.randint(0, 6, (n, 4)),
            torch.randn(n, 2, requires_grad=True),
        ]

    _check(f, args)


@pytest.mark.parametrize("diagonal", [0, 1, -2])
def test_triu_and_tril_masks(fresh, diagonal):
    """An eager attention's causal mask (triu of a full -inf matrix of symbolic size) and
    tril/triu of a batch of rectangles, with their gradients."""

    def square(x):
        s = x.shape[-1]
        mask = torch.full((s, s), float("-inf")).triu(diagonal)
        return x.tril(diagonal) * 2 + x.triu(diagonal) + mask.exp()

    _check(square, lambda n: [_x(2, n, n)(n)])
    _check(lambda y: y.triu(diagonal) - y.tril(diagonal) * 3, lambda n: [_x(3, n, n + 2)(n)])


def test_scatter_add_along_the_symbolic_dim(fresh):
    def f(x, idx, src):
        return x.scatter_add(0, idx, src) * 1.5

    _check(
        f,
        lambda n: [
            _x("n", 3)(n),
            torch.randint(0, n, (n + 2, 3)),
            torch.randn(n + 2, 3, requires_grad=True),
        ],
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max_dim_values_and_first_index(fresh, dtype):
    """Ties give the first index, a NaN is the maximum and -inf rows still pick index 0."""

    def f(x):
        v, i = x.max(dim=-1)
        vk, ik = torch.max(x, 0, keepdim=True)
        return v * 2 + i.to(x.dtype) + (vk + ik).to(x.dtype).sum() + x.max()

    def args(n):
        x = torch.randint(-2, 3, (n, 5)).to(dtype)  # many ties
        x[0, 3] = float("nan")
        x[1] = float("-inf")
        return [x]

    _check(f, args, grad=False, dtype_tol={"equal_nan": True})

    def g(x):  # the gradient goes to the first maximum only
        return x.max(dim=1)[0] * 3

    _check(
        g,
        lambda n: [_x("n", 7, dtype=dtype)(n)],
        dtype_tol=BF16 if dtype == torch.bfloat16 else None,
    )


@pytest.mark.parametrize("k", [1, 2, 4])
def test_topk_router(fresh, k):
    """DBRX's router: softmax, topk over the experts, the weights renormalized; the gradient
    goes through topk's backward (a scatter of the values' gradient)."""
    pick = {
        1: lambda w: torch.topk(w, 1, dim=-1),
        2: lambda w: torch.topk(w, 2, dim=-1),
        4: lambda w: w.topk(4),
    }[k]  # a literal k: dynamic=True makes a closure's int a SymInt

    def f(logits):
        w = torch.softmax(logits, dim=-1)
        top_w, top_i = pick(w)
        return top_w / top_w.sum(-1, keepdim=True) + top_i.to(w.dtype)

    _check(f, lambda n: [_x("n", 8)(n)])


def test_topk_rows_of_equal_values_give_distinct_indices(fresh):
    """PyTorch leaves the order of tied indices to the implementation: the values must match,
    and the indices be distinct and point at them (dyngen: lowest index first)."""
    compiled = torch.compile(lambda x: x.topk(3, dim=1), backend=dyngen.aot.backend, dynamic=True)
    for n in (3, 6, 11):
        x = torch.randn(n, 6)
        x[0] = float("-inf")
        x[1] = 1.0
        v, i = compiled(x)
        torch.testing.assert_close(v, x.topk(3, dim=1).values)
        assert i[:2].tolist() == [[0, 1, 2], [0, 1, 2]]
        torch.testing.assert_close(x.gather(1, i), v)
    assert dyngen.stats()["fallbacks"] == []


def _olmoe_router(logits):
    """OLMoE's router: bf16 logits, softmax in f32, the top 8 of 64 experts."""
    w = torch.softmax(logits, dim=-1, dtype=torch.float32)
    return torch.topk(w, 8, dim=-1)


def test_topk_bf16_router_matches_torch_on_distinct_values(fresh):
    """Distinct logits leave no freedom: values and indices equal torch.topk's, along the last
    dim and (through the swap to the last dim and back) along the first."""
    router = torch.compile(_olmoe_router, backend=dyngen.aot.backend, dynamic=True)
    first = torch.compile(lambda x: x.topk(3, dim=0), backend=dyngen.aot.backend, dynamic=True)
    for n in (1, 5, 37):
        logits = torch.stack([torch.randperm(64) for _ in range(n)]).to(torch.bfloat16) / 8
        v, i = router(logits)
        want = _olmoe_router(logits)
        torch.testing.assert_close(v, want.values)  # the softmax's ulps; the pick is exact
        assert torch.equal(i, want.indices)
        cols = torch.stack([torch.randperm(n + 3) for _ in range(4)], dim=1).float()
        v, i = first(cols)
        assert torch.equal(v, cols.topk(3, dim=0).values)
        assert torch.equal(i, cols.topk(3, dim=0).indices)
    assert dyngen.stats()["fallbacks"] == []


def test_topk_bf16_ties_nan_and_k_equal_to_the_row_follow_the_note(fresh):
    """Note [Top-k ties]: exact bf16 ties go lower index first (a stable descending sort), NaN
    ranks above every number; the values match torch.topk's; k = 16 = the row's length."""
    router = torch.compile(_olmoe_router, backend=dyngen.aot.backend, dynamic=True)
    whole = torch.compile(lambda x: x.topk(16), backend=dyngen.aot.backend, dynamic=True)
    for n in (3, 9):
        logits = torch.randint(-2, 3, (n, 64)).to(torch.bfloat16)  # five values: ties everywhere
        logits[0, 40] = float("nan")
        v, i = router(logits)
        w = torch.softmax(logits, dim=-1, dtype=torch.float32)
        stable = torch.sort(w, dim=-1, descending=True, stable=True).indices[:, :8]
        assert torch.equal(i, stable)
        torch.testing.assert_close(v[1:], _olmoe_router(logits).values[1:])
        assert v[0].isnan().all()  # a NaN logit makes its row's softmax NaN
        row = torch.randint(-3, 3, (n, 16)).float()
        row[:, 5] = float("-inf")
        v, i = whole(row)
        assert torch.equal(i, torch.sort(row, dim=-1, descending=True, stable=True).indices)
        assert torch.equal(v, row.topk(16).values)
    assert dyngen.stats()["fallbacks"] == []


def test_topk_with_a_large_k_runs_as_aten_and_says_so(fresh):
    from dyngen.options import options, set_options

    old = options().strict
    set_options(strict=False)  # the partial graph is what is under test
    try:
        _large_k()
    finally:
        set_options(strict=old)


def _large_k():
    compiled = torch.compile(
        lambda x: x.topk(20, dim=1)[0] * 2, backend=dyngen.aot.backend, dynamic=True
    )
    for n in (3, 5):
        x = torch.randn(n, 24)
        torch.testing.assert_close(compiled(x), x.topk(20, dim=1)[0] * 2)
    reasons = " ".join(f["reason"] for f in dyngen.stats()["fallbacks"])
    assert "topk" in reasons and "k <= 16" in reasons, reasons


def test_indexing_by_a_two_dimensional_position_tensor(fresh):
    """RoPE's cos[position_ids] with position_ids [batch, seq]: read flattened and reshaped, and
    its gradient (index_put with accumulate over the same index)."""

    def f(table, pos):
        return table[pos] * 2 + table[:, 1:][pos].sum(-1, keepdim=True)

    def args(n):
        return [_x(16, 6)(n), torch.randint(0, 16, (2, n))]

    _check(f, args)


@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_and_its_gradient(fresh, padding_idx):
    w = torch.randn(10, 6, requires_grad=True)
    _check(
        lambda ids, w: F.embedding(ids, w, padding_idx=padding_idx) * 2,
        lambda n: [torch.randint(0, 10, (2, n)), w],
    )
    assert dyngen.stats()["ops_where"]["aten"] == 0


def test_rotate_half_and_slices_from_the_end(fresh):
    """RoPE's rotate_half (cat on dim -1 of two halves of a static head dim, one of them bf16:
    cat promotes), a KV cache's first update (cat with a 1-d empty tensor, which cat skips) and
    slices from the end of the symbolic dim (x[-4:]: dyngen cannot prove the dim is at least 4,
    so the bound is max(n - 4, 0) as PyTorch clamps it), forward and backward; only the token
    dim is dynamic, as in a model."""

    def f(x):
        half = x.shape[-1] // 2
        rot = torch.cat((-x[..., half:], x[..., :half].to(torch.bfloat16)), dim=-1)
        cached = torch.cat([torch.tensor([]), rot], dim=-2)  # a KV cache's first update
        return cached * 2 + x[-4:].sum(0) + x[:-1].sum(0)

    compiled = torch.compile(f, backend=dyngen.aot.backend)
    for n in (5, 6, 11):
        x = torch.randn(n, 6, requires_grad=True)
        torch._dynamo.mark_dynamic(x, 0)
        xr = x.detach().clone().requires_grad_()
        got, want = compiled(x), f(xr)
        torch.testing.assert_close(got, want)
        # The gradient sums terms of up to ~300 with cancellation: dyngen and eager each land
        # ~3e-5 from the f64 value at some draws, so the bound scales with the gradient's size.
        g, w = (
            torch.autograd.grad(got.square().sum(), x)[0],
            torch.autograd.grad(want.square().sum(), xr)[0],
        )
        torch.testing.assert_close(g, w, rtol=1.3e-6, atol=1e-6 * w.abs().max().item())
    s = dyngen.stats()
    assert s["fallbacks"] == [] and s["ops_where"]["aten"] == 0, s
    assert s["dynamic_graphs"] + s["graphs_where"]["dyngen"] >= 1 and s["backend_calls"] == 1, s
