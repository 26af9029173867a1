"""aten._grouped_mm (transformers 5's grouped_mm experts call torch._grouped_mm) lowered onto the
IR's grouped_mm and grouped_mm_wgrad (Note [torch._grouped_mm lowering]): forward and backward
compiled whole by dyngen, against torch._grouped_mm's own results, under the ATen executor and the
generated kernels' host emulation; empty experts, one expert taking every row, a single row and
rows past the last offset. Needs only torch (its CPU _grouped_mm), so it runs on both
transformers generations."""

import pytest
import torch

import dyngen
import dyngen.aot

E, K, N = 4, 16, 8  # bf16 rows of 16 and 8 elements: torch's 16-byte stride rule holds

# (rows, per-expert counts): the counts sum to at most rows (the rest lie past the last offset)
CASES = {
    "spread": (11, [3, 0, 5, 3]),
    "empty experts": (9, [0, 6, 0, 3]),
    "one expert takes all": (7, [0, 0, 7, 0]),
    "rows past the last offset": (10, [2, 3, 0, 1]),
    "one row": (1, [0, 1, 0, 0]),
}


def _inputs(rows, counts, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(rows, K, generator=g).to(dtype)
    w_nk = (torch.randn(E, N, K, generator=g) / K**0.5).to(dtype)  # as transformers stores it
    offs = torch.cumsum(torch.tensor(counts), 0).to(torch.int32)
    dy = torch.randn(rows, N, generator=g).to(dtype)
    return a, w_nk, offs, dy


def nk_view(a, w_nk, offs):
    """transformers 5's call: the [E, N, K] parameter as its transposed view [E, K, N]."""
    return torch._grouped_mm(a, w_nk.transpose(-2, -1), offs=offs)


def both_layouts(a, w_nk, offs):
    """The transposed view (w_layout "nk") and a contiguous [E, K, N] copy (w_layout "kn") in one
    graph (half the graphs to generate kernels for under emulation)."""
    return nk_view(a, w_nk, offs), torch._grouped_mm(a, w_nk.transpose(-2, -1) * 1, offs=offs)


def _run(fn, a, w, offs, dy, dynamic=False):
    a, w = a.clone().requires_grad_(True), w.clone().requires_grad_(True)
    if dynamic:
        torch._dynamo.mark_dynamic(a, 0)  # the first call compiles the symbolic graph
    outs = fn(a, w, offs)
    da, dw = torch.autograd.grad(outs, [a, w], [dy, dy.flip(0)])
    return outs, da, dw


def test_grouped_mm_lowering_matches_torch(fresh, executor):
    """bf16 only: torch's meta function of _grouped_mm (what Dynamo traces with) refuses other
    dtypes, though its CPU kernel runs f32."""
    compiled = torch.compile(both_layouts, backend=dyngen.aot.backend)
    tol = {"rtol": 1e-2, "atol": 1e-2}
    for seed, (case, (rows, counts)) in enumerate(CASES.items()):
        a, w, offs, dy = _inputs(rows, counts, torch.bfloat16, seed)
        got = _run(compiled, a, w, offs, dy, dynamic=seed == 0)
        want = _run(both_layouts, a, w, offs, dy)
        end = int(offs[-1])  # torch leaves rows past the last offset uninitialized
        pairs = [("output nk", got[0][0], want[0][0]), ("output kn", got[0][1], want[0][1])]
        for name, x, y in [*pairs, ("grad a", got[1], want[1])]:
            assert x.shape == y.shape and x.dtype == y.dtype, (case, name)
            torch.testing.assert_close(x[:end], y[:end], **tol, msg=f"{case}: {name}")
            assert not x[end:].any(), f"{case}: {name} past the last offset is zero in dyngen"
        torch.testing.assert_close(got[2], want[2], **tol, msg=f"{case}: grad w")
        for e, n in enumerate(counts):
            if n == 0:
                assert not got[2][e].any(), f"{case}: expert {e} has no rows, zero gradient"
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]  # every graph whole in dyngen: no ATen op left
    assert s["graphs_where"]["partial"] == s["graphs_where"]["aten"] == 0, s["graphs_where"]
    # forward and backward of the symbolic graph and of the one-row graph (Dynamo specializes 1)
    assert s["graphs_where"]["dyngen"] == 4, s["graphs_where"]
    if executor == "emulate":
        assert "emulate" in s["executor"].split("+"), s["executor"]


def test_torch_grouped_mm_offsets_are_inclusive_int32_group_ends():
    """What the lowering assumes of torch._grouped_mm on this torch (CPU): offs are int32 ends of
    the groups (expert e takes rows offs[e-1] .. offs[e] - 1), an int64 offs is refused."""
    a, w, offs, _ = _inputs(9, [2, 0, 4, 3], torch.float32, 0)
    out = nk_view(a, w, offs)
    bounds = [0, *offs.tolist()]
    for e in range(E):
        lo, hi = bounds[e], bounds[e + 1]
        torch.testing.assert_close(out[lo:hi], a[lo:hi] @ w[e].t())
    with pytest.raises(RuntimeError, match="int32"):
        nk_view(a, w, offs.long())
