"""Test helpers: the seed's models and a bf16 comparison."""
import torch
from torch import nn

from show_graphs import Routed, build_expert, routed_inputs  # noqa: F401  (frontends/python/tools)


def assert_close_bf16(got: torch.Tensor, want: torch.Tensor, what: str = "") -> None:
    """Equal within bf16 rounding, relative to the tensor's scale."""
    got, want = got.detach().float(), want.detach().float()
    assert got.shape == want.shape, f"{what}: {got.shape} vs {want.shape}"
    scale = want.abs().max().item() + 1e-6
    err = (got - want).abs().max().item()
    assert err <= 2e-2 * scale + 1e-5, f"{what}: max error {err:.3g} at scale {scale:.3g}"


def grads_of(model: nn.Module) -> dict:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
