"""Test helpers: the seed's models and training loop, and a bf16 comparison."""

import copy

import torch
from show_graphs import Routed, build_expert, routed_inputs  # noqa: F401  (frontends/python/tools)
from torch import nn

# Per element: |got - want| <= atol + rtol * |want|. rtol is two bf16 roundings (2^-8 each) plus
# accumulation order; atol covers elements that cancel to about zero.
BF16_RTOL, BF16_ATOL = 2e-2, 5e-3


def assert_close_bf16(
    got: torch.Tensor,
    want: torch.Tensor,
    what: str = "",
    rtol: float = BF16_RTOL,
    atol: float = BF16_ATOL,
) -> None:
    """Equal within bf16 rounding, element by element."""
    got, want = got.detach().float(), want.detach().float()
    assert got.shape == want.shape, f"{what}: {got.shape} vs {want.shape}"
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def grads_of(model: nn.Module) -> dict:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


TOTAL = 80  # tokens before routing


def make(hidden, ffn, rank, seed=0):
    """The seed's module (routed PEFT-LoRA OLMoE expert, alpha = 2r) and an eager copy."""
    torch.manual_seed(seed)
    model = Routed(build_expert(hidden, ffn, rank, 2 * rank))
    return model, copy.deepcopy(model)


def train_loop(compiled, eager, tokens, hidden):
    """Forward + backward per token count; with `eager`, outputs and input gradients are checked
    against it (and its parameters accumulate the reference gradients)."""
    for step, n in enumerate(tokens):
        x, mask = routed_inputs(TOTAL, n, hidden, seed=step)
        out = compiled(x, mask)
        out.float().square().sum().backward()
        if eager is None:
            continue
        x_ref = x.detach().clone().requires_grad_(True)
        want = eager(x_ref, mask)
        want.float().square().sum().backward()
        assert_close_bf16(out, want, f"output, {n} tokens")
        assert_close_bf16(x.grad, x_ref.grad, f"input grad, {n} tokens")


def check_lora_grads(model, eager):
    """Every lora_A and lora_B gradient (accumulated over the loop) matches eager's, element by
    element; the sums over many steps of bf16 products differ in rounding more than one result
    does, hence the wider tolerance (seen: 0.021 at worst over 30 steps)."""
    got, want = grads_of(model), grads_of(eager)
    lora = [k for k in want if "lora_" in k]
    assert len(lora) == 6 and set(got) == set(want)  # A and B of gate, up, down
    for k in lora:
        assert_close_bf16(got[k], want[k], k, rtol=5e-2, atol=3e-2)


def moe_tail(expert):
    """The MoE block's gather/scatter around an expert (x[None, top_x], w[top_x, idx, None],
    index_add_)."""

    def f(x, w, top_x, idx):
        cur = x[None, top_x].reshape(-1, x.shape[-1])
        y = expert(cur) * w[top_x, idx, None]
        out = torch.zeros_like(x)
        out.index_add_(0, top_x, y.to(x.dtype))
        return out

    return f


def assert_close(got: torch.Tensor, want: torch.Tensor, what: str = "", rtol=None, atol=None):
    """Element by element within rtol/atol (defaults by dtype: bf16 rounding for bf16)."""
    got, want = got.detach(), want.detach()
    assert got.shape == want.shape and got.dtype == want.dtype, (
        f"{what}: {got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    )
    tol = {torch.bfloat16: (BF16_RTOL, BF16_ATOL), torch.float16: (2e-3, 1e-4)}.get(
        want.dtype, (1e-4, 1e-5)
    )
    torch.testing.assert_close(
        got.float(),
        want.float(),
        rtol=rtol or tol[0],
        atol=atol or tol[1],
        msg=lambda m: f"{what}: {m}",
    )


# The parallel-training tests' gradient tolerance (test_parallel_training.py): the relative
# difference of a whole tensor, |got - want| / |want| in the 2-norm. A gradient summed from k
# bf16 contributions rounds its partial sums at their magnitude, so an element that cancels to
# about zero can differ by an ulp of the partial sums, which no per-element tolerance allows.
GRAD_REL = 3e-2


def assert_grad_close(got: torch.Tensor, want: torch.Tensor, what: str = "", rel=GRAD_REL):
    """Equal within `rel` of the tensor's norm (zeros equal zeros)."""
    got, want = got.detach().float(), want.detach().float()
    assert got.shape == want.shape, f"{what}: {got.shape} vs {want.shape}"
    diff = float((got - want).norm())
    scale = float(want.norm())
    assert diff <= rel * scale or diff == 0.0, f"{what}: relative difference {diff / scale:.3g}"
