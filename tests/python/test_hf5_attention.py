"""transformers 5's attention under dyngen (Note [Attention masks], Note [Index tensors that
broadcast], dyngen/fx/attention_ops.py): the causal mask built as a graph value the way
transformers 5's `sdpa_mask` builds it (index functions over broadcast aranges, packed-sequence and
padding terms, combined with `&` and `|`), then `F.scaled_dot_product_attention` with that bool
mask or an additive one, forward and backward, at two symbolic lengths, compiled whole (no
fallback, no partial graph, one compile for both lengths), against eager PyTorch under the ATen
executor and the generated kernels' host emulation. The patterns are written out as plain
functions, so the module runs on both transformers generations."""

import pytest
import torch
import torch.nn.functional as F

import dyngen
import dyngen.aot

HEADS, DIM, HIDDEN = 4, 8, 32


def hf5_mask(position_ids, padding, with_or):
    """[B, 1, S, S] bool, as transformers 5's sdpa_mask makes it without vmap: index tensors
    broadcast over (batch, head, q, kv); the causal term reads the positions through them, the
    packed-sequence term (find_packed_sequence_indices) and the padding term too."""
    b, s = position_ids.shape
    first = position_ids[:, :1] - 1
    packed = (torch.diff(position_ids, prepend=first, dim=-1) != 1).cumsum(-1)
    bi = torch.arange(b)[:, None, None, None]
    qi = torch.arange(s)[None, None, :, None]
    ki = torch.arange(s)[None, None, None, :]
    mask = qi.new_ones((), dtype=torch.bool)
    mask = mask & (packed[bi, qi] == packed[bi, ki])
    mask = mask & (position_ids[bi, ki] <= position_ids[bi, qi])
    if with_or:  # or_masks: every query also sees the first key
        mask = mask | (ki == 0)
    mask = mask & padding[bi, ki]
    return mask.expand(b, -1, s, s)


def attention(kv_heads, mask_kind):
    """x [B, S, HIDDEN] through q, k, v projections and SDPA with the mask of `mask_kind`: "bool"
    ([B, 1, S, S]), "additive" (0 / -inf in x's dtype), "heads" (bool, expanded over the query
    heads), "or" (bool, with an or_masks term)."""

    def heads(x, w, h):
        return (x @ w).view(x.shape[0], x.shape[1], h, DIM).transpose(1, 2)

    def f(x, wq, wk, wv, position_ids, padding):
        mask = hf5_mask(position_ids, padding, with_or=mask_kind == "or")
        if mask_kind == "additive":
            mask = torch.where(mask, 0.0, float("-inf")).to(x.dtype)
        elif mask_kind == "heads":
            mask = mask.expand(-1, HEADS, -1, -1)
        q, k, v = heads(x, wq, HEADS), heads(x, wk, kv_heads), heads(x, wv, kv_heads)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=kv_heads != HEADS)
        return o.transpose(1, 2).reshape(x.shape[0], x.shape[1], HIDDEN) * 2

    return f


def _inputs(b, s, kv_heads, dtype, seed):
    """Two sequences packed into the first row (positions restart), a left-padded second row:
    its first query sees no key at all (a fully hidden row)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, s, HIDDEN, generator=g)
    ws = [torch.randn(HIDDEN, h * DIM, generator=g) * 0.3 for h in (HEADS, kv_heads, kv_heads)]
    half = s // 2
    pos = torch.cat([torch.arange(half), torch.arange(s - half)]).expand(b, s).clone()
    padding = torch.ones(b, s, dtype=torch.bool)
    if b > 1:
        padding[1, :2] = False
        pos[1] = torch.arange(s)
    return [t.to(dtype) for t in [x, *ws]], pos, padding


def _value_and_grads(fn, floats, pos, padding):
    floats = [t.detach().clone().requires_grad_() for t in floats]
    out = fn(*floats, pos, padding)
    return [out, *torch.autograd.grad(out.float().square().sum(), floats)]


CASES = [(4, "bool"), (2, "bool"), (2, "additive"), (4, "heads"), (2, "or")]


@pytest.mark.parametrize("kv_heads,mask_kind", CASES)
def test_masked_attention_matches_torch(fresh, executor, kv_heads, mask_kind):
    f = attention(kv_heads, mask_kind)
    compiled = torch.compile(f, backend=dyngen.aot.backend, dynamic=True)
    calls = []
    for seed, s in enumerate((7, 10)):
        floats, pos, padding = _inputs(2, s, kv_heads, torch.float32, seed)
        got = _value_and_grads(compiled, floats, pos, padding)
        want = _value_and_grads(f, floats, pos, padding)
        for name, g, w in zip(("out", "dx", "dwq", "dwk", "dwv"), got, want):
            # f32 sums in another order: gradients of a few hundred differ by ~1e-3 from eager's
            # (both as far from f64); a wrong mask moves them by their own size.
            atol = 2e-5 * float(w.abs().max())
            torch.testing.assert_close(g, w, atol=atol, rtol=1e-4, msg=f"length {s}: {name}")
        calls.append(dyngen.stats()["backend_calls"])
    assert not got[0][1, 0].any(), "a query that sees no key gives zeros, as the CPU kernel"
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    assert s["graphs_where"]["partial"] == s["graphs_where"]["aten"] == 0, s["graphs_where"]
    assert calls[0] == calls[1], f"a new length compiled again: {calls}"
    if executor == "emulate":
        assert "emulate" in s["executor"].split("+"), s["executor"]


@pytest.fixture
def sdpa_shim():
    """dyngen.thunderfx.compile's SDPA shim in place, as in a process that compiled a model with
    it (Note [SDPA is_causal under dynamic shapes]); the previous state is restored after."""
    import dyngen.shims

    had = bool(dyngen.shims.installed())
    dyngen.shims.install()
    yield
    if not had:
        dyngen.shims.remove()


@pytest.mark.parametrize("kv_heads", [2, 4])
def test_masked_attention_under_the_sdpa_shim(fresh, sdpa_shim, executor, kv_heads):
    """Through the shim's wrapper, `enable_gqa=kv_heads != HEADS` with a symbolic head count is
    a SymBool that broke the graph before the shim made it a constant as it does is_causal."""
    test_masked_attention_matches_torch(fresh, executor, kv_heads, "bool")


def test_masked_attention_bf16_no_farther_from_f32_than_eager(fresh):
    """bf16 under emulation against eager's f32 result: at most twice as far as eager's own bf16
    result (dyngen rounds once per kernel, eager per op)."""
    from dyngen.options import options, set_options

    saved = options()
    set_options(executor="emulate")
    try:
        f = attention(2, "bool")
        compiled = torch.compile(f, backend=dyngen.aot.backend, dynamic=True)
        for seed, s in enumerate((7, 10)):
            floats, pos, padding = _inputs(2, s, 2, torch.float32, seed)
            exact = _value_and_grads(f, floats, pos, padding)
            half = [t.bfloat16() for t in floats]
            got = _value_and_grads(compiled, half, pos, padding)
            eager = _value_and_grads(f, half, pos, padding)
            for g, e, x in zip(got, eager, exact):
                err, eager_err = (g.float() - x).abs().max(), (e.float() - x).abs().max()
                assert err <= 2 * eager_err + 1e-3, (s, float(err), float(eager_err))
    finally:
        set_options(**saved.__dict__)
    s = dyngen.stats()
    assert s["fallbacks"] == [] and s["graphs_where"]["partial"] == 0, s


def test_int_bitwise_and_is_left_to_aten_with_its_reason(fresh):
    """Only bool bitwise ops are lowered: an integer one is a fallback naming the dtype (under
    DYNGEN_STRICT=1 an error), not a wrong answer."""
    from dyngen.errors import FallbackError
    from dyngen.options import options, set_options

    saved = options()
    set_options(executor="reference", strict=True)
    try:
        compiled = torch.compile(lambda a, b: (a & b) + 1, backend=dyngen.aot.backend)
        with pytest.raises(Exception, match="bitwise_and on i64") as caught:
            compiled(torch.tensor([6, 5, 3]), torch.tensor([3, 1, 7]))
    finally:
        set_options(**saved.__dict__)
    chain = [caught.value, caught.value.__cause__, caught.value.__context__]
    assert any(isinstance(e, FallbackError) for e in chain), chain


def jitter(x, w, noise, flat_noise):
    """PhiMoE's input jitter: `hidden_states *= noise` in place, on the tensor and on a view of
    it; AOTAutograd's backward clones the updated value with new_empty_strided and aten.copy."""
    h = x @ w
    h *= noise
    flat = h.view(-1, h.shape[-1])
    flat *= flat_noise
    return (h @ w.t()).square().sum()


def test_in_place_jitter_backward_compiles_whole(fresh, executor):
    compiled = torch.compile(jitter, backend=dyngen.aot.backend, dynamic=True)
    for s in (5, 8):
        g = torch.Generator().manual_seed(s)
        x, w = torch.randn(1, s, 16, generator=g), torch.randn(16, 32, generator=g)
        noise, flat_noise = torch.rand(1, s, 32, generator=g), torch.rand(s, 32, generator=g)
        got, want = [], []
        for fn, out in ((compiled, got), (jitter, want)):
            xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
            loss = fn(xs, ws, noise, flat_noise)
            out += [loss, *torch.autograd.grad(loss, [xs, ws])]
        for name, a, b in zip(("loss", "dx", "dw"), got, want):
            atol = 1e-5 * float(b.abs().max())
            torch.testing.assert_close(a, b, atol=atol, rtol=1e-5, msg=f"length {s}: {name}")
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    assert s["graphs_where"]["partial"] == s["graphs_where"]["aten"] == 0, s["graphs_where"]
