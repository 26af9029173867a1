"""The grouped-experts primitives (torch.ops.dyngen.*) and grouped_experts() against a per-expert
loop: empty experts, every token on one expert, T = 1, and the seed models' E/k (OLMoE 64/8, Phi
and GRIN 16/2, DBRX 16/4); eagerly (the ops' bodies) and compiled by dyngen (AOTAutograd, the
process's executor), forward and backward."""

import copy

import pytest
import torch
from helpers import GRAD_REL, assert_close_bf16
from torch import nn

import dyngen
import dyngen.aot
from dyngen.moe.grouped import ExpertLinear, Lora, grouped_experts

SHAPES = [(64, 8), (16, 2), (16, 4)]  # (experts, top-k): OLMoE, Phi/GRIN, DBRX
H, F, R = 16, 8, 4


def routing(kind: str, t: int, e: int, k: int, seed: int = 0) -> torch.Tensor:
    """[t, k] expert indices, distinct per token: "spread" (random), "empty" (only the first
    k + 1 experts used, the rest empty) or "one" (expert 3 in every token's first slot)."""
    g = torch.Generator().manual_seed(seed)
    if kind == "empty":
        pick = torch.stack([torch.randperm(k + 1, generator=g)[:k] for _ in range(t)])
    else:
        pick = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(t)])
    if kind == "one":
        pick = torch.where(pick == 3, pick[:, :1], pick)
        pick[:, 0] = 3
    return pick


def segments_by_loop(idx: torch.Tensor, e: int):
    """Each expert's (flat position list), in ascending position: what the model's loop gathers."""
    flat = idx.reshape(-1)
    return [torch.nonzero(flat == x).flatten() for x in range(e)]


@pytest.mark.parametrize("e, k", SHAPES)
@pytest.mark.parametrize("kind", ["spread", "empty", "one"])
@pytest.mark.parametrize("t", [1, 5, 37])
def test_primitives_match_a_per_expert_loop(e, k, kind, t):
    torch.manual_seed(t)
    idx = routing(kind, t, e, k, seed=t)
    segs = segments_by_loop(idx, e)
    offs = torch.ops.dyngen.expert_offsets(idx, e)
    order = torch.ops.dyngen.expert_order(idx, e)
    assert offs.dtype == order.dtype == torch.int32
    assert offs.tolist() == torch.cumsum(torch.tensor([len(s) for s in segs]), 0).tolist()
    assert order.tolist() == torch.cat(segs).tolist()
    assert torch.ops.dyngen.expert_offsets(idx.int(), e).equal(offs)

    a = torch.randn(t * k, H, dtype=torch.float32)
    ws = [torch.randn(F, H) for _ in range(e)]
    out = torch.ops.dyngen.grouped_mm(a, offs, ws)
    fused_kn = torch.stack([w.t() for w in ws])  # [E, K, N]
    lo = 0
    for x, s in enumerate(segs):
        hi = lo + len(s)
        want = a[lo:hi] @ ws[x].t()
        torch.testing.assert_close(out[lo:hi], want, rtol=1e-5, atol=1e-5)
        lo = hi
    torch.testing.assert_close(torch.ops.dyngen.grouped_mm(a, offs, [fused_kn], False), out)
    torch.testing.assert_close(torch.ops.dyngen.grouped_mm(a, offs, [torch.stack(ws)]), out)

    g = torch.randn(t * k, F)
    wg = torch.ops.dyngen.grouped_mm_wgrad(g, a, offs)
    assert wg.shape == (e, F, H)
    lo = 0
    for x, s in enumerate(segs):
        hi = lo + len(s)
        torch.testing.assert_close(wg[x], g[lo:hi].t() @ a[lo:hi], rtol=1e-5, atol=1e-5)
        if not len(s):
            assert not wg[x].any(), "an empty expert's gradient is zero"
        lo = hi


def test_bad_expert_index_is_an_error():
    idx = torch.tensor([[0, 5], [1, 2]])
    with pytest.raises(IndexError, match="out of range"):
        torch.ops.dyngen.expert_offsets(idx, 4)
    with pytest.raises(IndexError, match="out of range"):
        torch.ops.dyngen.expert_order(-idx, 4)


class Experts(nn.Module):
    """E SwiGLU experts (bf16) with f32 LoRA A/B on gate, up and down, as PEFT keeps them."""

    def __init__(self, e: int):
        super().__init__()

        def mats(n, k, dtype, std):
            return nn.ParameterList(
                [nn.Parameter((torch.randn(n, k) * std).to(dtype)) for _ in range(e)]
            )

        self.base = nn.ModuleDict(
            {
                "gate": mats(F, H, torch.bfloat16, 0.3),
                "up": mats(F, H, torch.bfloat16, 0.3),
                "down": mats(H, F, torch.bfloat16, 0.3),
            }
        )
        for p in self.base.parameters():
            p.requires_grad_(False)  # frozen, as under PEFT
        self.lora_a = nn.ModuleDict(
            {
                n: mats(R, H if n != "down" else F, torch.float32, 0.3)
                for n in ("gate", "up", "down")
            }
        )
        self.lora_b = nn.ModuleDict(
            {
                n: mats(F if n != "down" else H, R, torch.float32, 0.1)
                for n in ("gate", "up", "down")
            }
        )
        self.e = e

    def linear(self, n):
        lora = Lora(list(self.lora_a[n]), list(self.lora_b[n]), 2.0)
        return ExpertLinear(list(self.base[n]), lora=lora)

    def grouped(self, x, idx, w):
        lins = [self.linear(n) for n in ("gate", "up", "down")]
        return grouped_experts(x, idx, w, *lins, nn.functional.silu, self.e)

    def one(self, n, x, ex):
        """PEFT's lora.Linear.forward for expert ex."""
        base = x @ self.base[n][ex].t()
        lora = (
            (x.to(self.lora_a[n][ex].dtype) @ self.lora_a[n][ex].t()) @ self.lora_b[n][ex].t() * 2.0
        )
        return (base + lora).to(base.dtype)

    def loop(self, x, idx, w):
        """The models' loop: per expert, gather, MLP, x routing weight, index_add_ in bf16."""
        out = torch.zeros_like(x)
        for ex in range(self.e):
            tok, slot = torch.where(idx == ex)
            cur = x[tok]
            h = nn.functional.silu(self.one("gate", cur, ex)) * self.one("up", cur, ex)
            out.index_add_(0, tok, (self.one("down", h, ex) * w[tok, slot, None]).to(x.dtype))
        return out


def rel(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.detach().double(), want.detach().double()
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


def forward_backward(m, fn, x, idx, w, dtype=None):
    """fn(x, idx, w) and the gradients of its squared sum for x, w and every LoRA factor."""
    x, w = (v.detach().clone().to(dtype or v.dtype).requires_grad_(True) for v in (x, w))
    out = fn(x, idx, w)
    lora = [p for p in m.parameters() if p.requires_grad]
    return [out, *torch.autograd.grad(out.double().square().sum(), [x, w, *lora])]


@pytest.mark.parametrize("e, k", SHAPES)
def test_grouped_experts_compiled_by_dyngen_match_the_loop(fresh, reference_executor, e, k):
    """Outputs within bf16 rounding of the models' loop; every gradient (x, routing weights, each
    expert's LoRA A and B) within the parallel-training tolerance of the exact one (the loop in
    f64), or at most twice as far from it as the loop: with a handful of tokens a tensor's
    gradient cancels, and the loop itself lands a few percent of its norm away there (the two
    round a token's sum over k apart: Note [Grouped experts semantics])."""
    torch.manual_seed(0)
    m = Experts(e)
    m64 = copy.deepcopy(m).double()
    compiled = torch.compile(m.grouped, backend=dyngen.aot.backend, dynamic=True)
    for step, (t, kind) in enumerate([(1, "spread"), (3, "one"), (6, "empty"), (11, "spread")]):
        x = torch.randn(t, H).to(torch.bfloat16)
        w = torch.rand(t, k).to(torch.bfloat16)
        idx = routing(kind, t, e, k, seed=step)
        got = forward_backward(m, compiled, x, idx, w)
        loop = forward_backward(m, m.loop, x, idx, w)
        exact = forward_backward(m64, m64.loop, x, idx, w, torch.float64)
        assert_close_bf16(got[0], loop[0], f"{t} tokens: output")
        names = ["output", "x", "routing weights"] + [f"LoRA {i}" for i in range(len(got) - 3)]
        for name, a, b, ex in zip(names, got, loop, exact):
            assert a.dtype == b.dtype and a.shape == b.shape, name
            assert rel(a, ex) <= max(GRAD_REL, 2 * rel(b, ex)), (
                f"{t} tokens, {name}: {rel(a, ex):.3g} from exact, the loop {rel(b, ex):.3g}"
            )
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    # T = 1 is a static graph of its own (Dynamo specializes 1); every later T shares one.
    assert s["backend_calls"] == 2, s


def test_grouped_experts_through_the_generated_kernels(fresh):
    """One short case through the core's generated kernels (host emulation on the CPU: the
    executor DYNGEN_EXECUTOR=emulate selects), E/k = 16/2 (Phi, GRIN) with an empty expert and
    one expert holding most rows; same checks as through the ATen executor."""
    from dyngen.options import options, set_options

    saved = options()
    set_options(executor="emulate")
    try:
        test_grouped_experts_compiled_by_dyngen_match_the_loop(None, None, 16, 2)
        s = dyngen.stats()
        assert "emulate" in s["executor"].split("+"), s["executor"]
        # The kernels were generated or taken from the kernel cache (the ATen executor has none).
        assert s["nvrtc_compiles"] + s["cache_hits_memory"] + s["cache_hits_disk"] > 0, s
    finally:
        set_options(**saved.__dict__)
