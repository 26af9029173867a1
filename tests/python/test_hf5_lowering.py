"""transformers 5's grouped_mm experts (integrations/moe.py, grouped_mm_experts_forward) and PEFT
0.21's LoRA on fused experts (baddbmm) compiled whole by dyngen: sort of expert ids, histc,
cumsum, floor_divide, chunk, index_put and index with one index tensor (Note [Sorting expert ids]
in frontends/python/dyngen/fx/sort_ops.py). The experts are written here as a plain function with
the same torch calls, so the module runs on both transformers generations. Each op against PyTorch
(forward, and gradients where differentiable) under the ATen executor and the generated kernels'
host emulation: empty experts, every row on one expert, one token; no fallback, no partial graph.
"""

import pytest
import torch
from test_export import capture

import dyngen
import dyngen.aot
from dyngen.fx.export import unsupported_reason
from dyngen.fx.sort_ops import index_bound

E, H, INTER, K, R = 8, 16, 8, 2, 4  # experts, hidden, intermediate, top-k, LoRA rank
TOL = {"rtol": 2e-2, "atol": 2e-2}  # bf16: one rounding apart (f32 summation order)

# (tokens, expert ids per token) for the routing cases
ROUTES = {
    "spread": (7, None),
    "empty experts": (6, [[1, 4], [6, 1], [4, 6], [1, 6], [6, 4], [4, 1]]),
    "one expert takes every row": (5, [[5, 5]] * 5),
    "one token": (1, [[3, 0]]),
}


def experts(hidden, top_k_index, top_k_weights, gate_up, down):
    """grouped_mm_experts_forward of transformers 5.23 for a gated experts module (OLMoE's)."""
    num_top_k = top_k_index.size(-1)
    num_tokens = hidden.size(0)
    sample_weights = top_k_weights.reshape(-1)
    expert_ids = top_k_index.reshape(-1)
    expert_ids_g, perm = torch.sort(expert_ids)
    selected = hidden[perm // num_top_k]
    sample_weights_g = sample_weights[perm]
    tokens_per_expert = torch.histc(expert_ids_g.float(), bins=E, min=0, max=E - 1)
    offsets = torch.cumsum(tokens_per_expert, dim=0, dtype=torch.int32)
    proj = torch._grouped_mm(selected, gate_up.transpose(-2, -1), offs=offsets)
    gate, up = proj.chunk(2, dim=-1)
    proj = torch._grouped_mm(
        torch.nn.functional.silu(gate) * up, down.transpose(-2, -1), offs=offsets
    )
    weighted = proj * sample_weights_g.unsqueeze(-1)
    inv_perm = torch.empty_like(perm)
    inv_perm[perm] = torch.arange(perm.size(0), device=hidden.device)
    weighted = weighted[inv_perm]
    return weighted.view(num_tokens, num_top_k, hidden.size(-1)).sum(dim=1).to(hidden.dtype)


def experts_lora(hidden, top_k_index, top_k_weights, gate_up, down, a_gu, b_gu, a_d, b_d):
    """With PEFT 0.21's LoRA on both fused parameters: W + scaling * B_e A_e by baddbmm."""
    gate_up = torch.baddbmm(gate_up, b_gu, a_gu, alpha=2.0)
    down = torch.baddbmm(down, b_d, a_d, alpha=2.0)
    return experts(hidden, top_k_index, top_k_weights, gate_up, down)


def _route(case, seed):
    tokens, ids = ROUTES[case]
    g = torch.Generator().manual_seed(seed)
    if ids is None:
        ids = [torch.randperm(E, generator=g)[:K].tolist() for _ in range(tokens)]
    weights = torch.rand(tokens, K, generator=g).bfloat16()
    return torch.randn(tokens, H, generator=g).bfloat16(), torch.tensor(ids), weights


def _params(seed, lora):
    g = torch.Generator().manual_seed(100 + seed)
    ps = [torch.randn(E, 2 * INTER, H, generator=g) / 4, torch.randn(E, H, INTER, generator=g) / 3]
    if lora:
        ps += [torch.randn(E, R, H, generator=g) / 4, torch.randn(E, 2 * INTER, R, generator=g) / 4]
        ps += [torch.randn(E, R, INTER, generator=g) / 3, torch.randn(E, H, R, generator=g) / 2]
    return [p.bfloat16() for p in ps]


def _run(fn, hidden, ids, weights, params, dy, dynamic=False):
    """fn's output and the gradients of hidden, the routing weights and every parameter."""
    leaves = [t.clone().requires_grad_(True) for t in (hidden, weights, *params)]
    if dynamic:  # the first call compiles the symbolic graph
        for t in (leaves[0], ids, leaves[1]):
            torch._dynamo.mark_dynamic(t, 0)
    out = fn(leaves[0], ids, leaves[1], *leaves[2:])
    return [out, *torch.autograd.grad(out, leaves, dy)]


def _assert_whole(graphs):
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    assert s["graphs_where"]["partial"] == s["graphs_where"]["aten"] == 0, s["graphs_where"]
    assert s["graphs_where"]["dyngen"] == graphs, s["graphs_where"]


@pytest.mark.parametrize("lora", [False, True], ids=["experts", "experts+lora"])
def test_transformers5_experts_compile_whole(fresh, executor, lora):
    fn = experts_lora if lora else experts
    compiled = torch.compile(fn, backend=dyngen.aot.backend)
    names = ["output", "grad hidden", "grad routing weights", "grad gate_up", "grad down"]
    names += ["grad A gate_up", "grad B gate_up", "grad A down", "grad B down"] if lora else []
    for seed, case in enumerate(ROUTES):
        hidden, ids, weights = _route(case, seed)
        params = _params(seed, lora)
        dy = torch.randn(hidden.shape, generator=torch.Generator().manual_seed(seed)).bfloat16()
        got = _run(compiled, hidden, ids, weights, params, dy, dynamic=seed == 0)
        want = _run(fn, hidden, ids, weights, params, dy)
        for name, x, y in zip(names, got, want):
            assert x.shape == y.shape and x.dtype == y.dtype, (case, name)
            torch.testing.assert_close(x, y, **TOL, msg=f"{case}: {name}")
        used = set(ids.flatten().tolist())
        for e in set(range(E)) - used:  # an expert without rows gets no gradient
            assert not got[3][e].any() and not got[4][e].any(), f"{case}: expert {e}"
    # forward and backward of the symbolic graph and of the one-token graph (Dynamo specializes 1)
    _assert_whole(4)


def _sort_and_count(ids):
    """The routing part: the permutation, histc's counts and the cumulative i32 offsets."""
    ids_g, perm = torch.sort(ids.reshape(-1))
    counts = torch.histc(ids_g.float(), bins=E, min=0, max=E - 1)
    return perm, counts, torch.cumsum(counts, dim=0, dtype=torch.int32)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_sort_histc_cumsum_match_torch(fresh, executor, dtype):
    """The permutation is torch.sort(stable=True)'s (Note [Sorting expert ids]: stable ties),
    counts and offsets are torch's exactly."""
    compiled = torch.compile(_sort_and_count, backend=dyngen.aot.backend, dynamic=True)
    for seed, case in enumerate(ROUTES):
        ids = _route(case, seed)[1].to(dtype)
        got = compiled(ids)
        perm = torch.sort(ids.reshape(-1), stable=True).indices
        assert torch.equal(got[0], perm), case
        for x, y in zip(got[1:], _sort_and_count(ids)[1:]):
            assert x.dtype == y.dtype and torch.equal(x, y), case
    _assert_whole(2)  # the symbolic graph and the one-token one


def _divide(a):
    return a // 3, torch.floor_divide(a, -4), a // 1


def test_floor_divide_by_a_constant_matches_torch(fresh, executor):
    """Negative dividends and a negative divisor round toward minus infinity, as in PyTorch."""
    compiled = torch.compile(_divide, backend=dyngen.aot.backend, dynamic=True)
    extremes = torch.tensor([2**31 - 1, -(2**31), 7], dtype=torch.int32)
    for a in (torch.arange(-13, 14, dtype=torch.int32), extremes):
        for x, y in zip(compiled(a), _divide(a)):
            assert x.dtype == y.dtype and torch.equal(x, y), (a, x, y)
    _assert_whole(1)


def _pieces(x, perm):
    """chunk and split along the last dim, x[idx] with one index tensor, and the inverse
    permutation written by index_put (transformers' inv_perm)."""
    a, b = x.chunk(2, dim=-1)
    c, d, e = torch.split(x, [2, 3, 1], dim=-1)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.size(0))
    y = (torch.nn.functional.silu(a) * b).sum(-1) + (c.sum(-1) - d[:, 0]) * e[:, 0]
    return y[perm][inv], x[perm], inv


def test_split_index_index_put_match_torch(fresh, executor):
    compiled = torch.compile(_pieces, backend=dyngen.aot.backend, dynamic=True)
    for rows in (9, 4):
        g = torch.Generator().manual_seed(rows)
        x, perm = torch.randn(rows, 6, generator=g), torch.randperm(rows, generator=g)
        dy = [torch.randn(rows, generator=g), torch.randn(rows, 6, generator=g)]
        results = []
        for fn in (compiled, _pieces):
            xg = x.clone().requires_grad_(True)
            out = fn(xg, perm)
            results.append([*out, *torch.autograd.grad(out[:2], [xg], dy)])
        got, want = results
        assert torch.equal(got[2], want[2])  # the inverse permutation, exactly
        for name, a, b in zip(["y", "x[perm]", "inv", "grad x"], got, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=name)
    _assert_whole(2)


def _baddbmm(w, b1, b2):
    return torch.baddbmm(w, b1, b2, alpha=2.0), torch.baddbmm(w, b1, b2, beta=0.5, alpha=-1.0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_baddbmm_matches_torch(fresh, executor, dtype):
    compiled = torch.compile(_baddbmm, backend=dyngen.aot.backend, dynamic=True)
    tol = TOL if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-5}
    for batch in (3, 5):
        g = torch.Generator().manual_seed(batch)
        shapes = [(batch, 6, 5), (batch, 6, R), (batch, R, 5)]
        inputs = [torch.randn(s, generator=g).to(dtype) for s in shapes]
        dy = [torch.randn(batch, 6, 5, generator=g).to(dtype) for _ in range(2)]
        results = []
        for fn in (compiled, _baddbmm):
            leaves = [t.clone().requires_grad_(True) for t in inputs]
            out = fn(*leaves)
            results.append([*out, *torch.autograd.grad(out, leaves, dy)])
        for name, a, b in zip(["out", "out beta", "grad w", "grad b1", "grad b2"], *results):
            torch.testing.assert_close(a, b, **tol, msg=name)
    _assert_whole(2)


def _call_reasons(gm) -> dict:
    return {n.name: unsupported_reason(n) for n in gm.graph.nodes if n.op == "call_function"}


def test_ids_of_unknown_range_are_not_sorted(fresh):
    """A sort whose values are used beyond histc (here returned), a descending sort, histc of
    another form, floor_divide of floats or by a tensor: Unsupported, with the reason."""

    def f(ids, x):
        vals, perm = torch.sort(ids)
        down = torch.sort(ids, descending=True).indices
        hist = torch.histc(x, bins=E, min=-1, max=1)
        return vals, perm, down, hist, x // 2, ids // (ids + 1)

    gm, _ = capture(f, [(torch.randint(0, E, (9,)), torch.randn(9))], dynamic=True)[0]
    reasons = [r for r in _call_reasons(gm).values() if r]
    assert any("ids of unknown range" in r and "not only by histc" in r for r in reasons), reasons
    assert any("descending" in r for r in reasons), reasons
    assert any("bins=E, min=0, max=E-1" in r for r in reasons), reasons
    assert sum("floor_divide" in r for r in reasons) == 2, reasons


def test_topk_indices_are_ids_in_range(fresh):
    """Note [Sorting expert ids]: indices of a topk over E columns, through a reshape and a cast,
    are ids in [0, E), so their sort is lowered whatever uses its values."""

    def f(logits):
        _, idx = torch.topk(logits.softmax(-1), K, dim=-1)
        return torch.sort(idx.reshape(-1).int())

    logits = torch.randn(5, E)
    torch._dynamo.mark_dynamic(logits, 0)  # tokens symbolic, E a constant as the router's weight
    gm, _ = capture(f, [(logits,)])[0]
    sort = next(n for n in gm.graph.nodes if n.target is torch.sort)
    assert index_bound(sort.args[0]) == E
    assert unsupported_reason(sort) is None
