"""The DBRX-style expert, `self.w1.view(n, ffn, -1)[e]` (transformers' DbrxExpertGLU): the weight
slice is `aten.select` in the forward and `select_backward` in the backward, and dyngen compiles
both graphs whole (no fallback), for every token count. The token dim is marked dynamic and the
expert index stays one Python int, so Dynamo keeps it a constant of the graph."""

import copy

import torch
from helpers import assert_close_bf16
from torch import nn

import dyngen
import dyngen.thunderfx

EXPERTS, FFN, HIDDEN = 4, 24, 16


class SlicedExpert(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(EXPERTS * FFN, HIDDEN) * 0.2)
        self.v1 = nn.Parameter(torch.randn(EXPERTS * FFN, HIDDEN) * 0.2)
        self.w2 = nn.Parameter(torch.randn(EXPERTS * FFN, HIDDEN) * 0.2)

    def forward(self, x, e: int):
        w1 = self.w1.view(EXPERTS, FFN, -1)[e]
        v1 = self.v1.view(EXPERTS, FFN, -1)[e]
        w2 = self.w2.view(EXPERTS, FFN, -1)[e]
        return (nn.functional.silu(x @ w1.t()) * (x @ v1.t())) @ w2


def test_sliced_expert_compiles_whole_forward_and_backward(fresh):
    torch.manual_seed(0)
    model = SlicedExpert().to(torch.bfloat16)
    eager = copy.deepcopy(model)
    compiled = dyngen.thunderfx.compile(model)
    e = 2
    for step, tokens in enumerate([5, 9, 12, 7]):
        x = torch.randn(tokens, HIDDEN, generator=torch.Generator().manual_seed(step))
        x = x.to(torch.bfloat16).requires_grad_(True)
        torch._dynamo.mark_dynamic(x, 0)
        x_ref = x.detach().clone().requires_grad_(True)
        out = compiled(x, e)
        want = eager(x_ref, e)
        assert_close_bf16(out, want, f"output, {tokens} tokens, expert {e}")
        out.float().square().sum().backward()
        want.float().square().sum().backward()
        assert_close_bf16(x.grad, x_ref.grad, f"input grad, {tokens} tokens")
        if step == 0:
            first = dyngen.stats()["graphs_compiled"]
    for name in ("w1", "v1", "w2"):
        assert_close_bf16(getattr(model, name).grad, getattr(eager, name).grad, f"{name} grad")
    s = dyngen.stats()
    assert s["fallbacks"] == []
    assert s["graphs_where"]["dyngen"] >= 2 and s["graphs_where"]["partial"] == 0
    assert s["ops_where"]["aten"] == 0
    assert s["graphs_compiled"] == first  # new token counts compile nothing
