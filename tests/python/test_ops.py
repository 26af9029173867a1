"""Op coverage through AOTAutograd: forward and backward ATen graphs exported and executed by
dyngen for several token counts, compared with eager (no Thunder involved)."""

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_close_bf16

import dyngen
import dyngen.aot


def mixer(x, w, b, g):
    h = F.linear(x, w, b)  # addmm
    a = torch.softmax(h.float(), dim=-1).to(x.dtype)  # decomposed: amax, sub, exp, sum, div
    y = torch.where(h > 0, F.silu(h), torch.tanh(h) * 0.5) + torch.sigmoid(a) * g
    y = y - y.mean(dim=-1, keepdim=True)
    y32 = y.float()  # an RMS norm, in f32 as models write it
    y = (y32 * torch.rsqrt(y32.square().mean(-1, keepdim=True) + 1e-5)).to(x.dtype)
    z = torch.cat([y[:, :3], y[:, 3:].exp().log()], dim=1)  # slice, cat, exp, log
    att = (z.unsqueeze(0) @ z.unsqueeze(0).transpose(1, 2)).squeeze(0)  # bmm over tokens
    return z.relu() + att.amax(-1, keepdim=True) / 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_training_ops_match_eager(fresh, dtype):
    torch.manual_seed(0)
    w = (torch.randn(12, 8) * 0.3).to(dtype).requires_grad_(True)
    b = torch.randn(12).to(dtype).requires_grad_(True)
    g = torch.randn(12).to(dtype).requires_grad_(True)
    compiled = torch.compile(mixer, backend=dyngen.aot.backend, dynamic=True)

    def close(a, e, what):
        if dtype == torch.float32:
            torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-4, msg=lambda m: f"{what}: {m}")
        else:
            assert_close_bf16(a, e, what)

    for n in (3, 6, 11):
        x = torch.randn(n, 8).to(dtype).requires_grad_(True)
        params = [x, w, b, g]
        ref = [p.detach().clone().requires_grad_(True) for p in params]
        out = compiled(*params)
        want = mixer(*ref)
        close(out, want, "output")
        got_g = torch.autograd.grad(out.float().sum(), params)
        want_g = torch.autograd.grad(want.float().sum(), ref)
        for k, (a, e) in enumerate(zip(got_g, want_g)):
            close(a, e, f"grad {k}")
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    assert (s["backend_calls"], s["graphs_compiled"]) == (1, 2)
