"""The grouped-experts ops evaluated with ATen (Note [Grouped experts semantics] in moe/grouped.py):
expert_offsets, expert_order, grouped_mm, grouped_mm_wgrad, as the contract between the core and
the frontend defines them. The ATen executor evaluates the IR ops with these, and the torch.library
primitives (moe/ops.py) run them as their eager bodies; both run outside the generated kernels, so
they may read the offsets on the host and loop over the experts.
"""

from __future__ import annotations

import torch


def _check_index(top_k_index: torch.Tensor, num_experts: int) -> torch.Tensor:
    """The entries flattened as i64; an index outside [0, E) is an error, never a wrong answer."""
    if top_k_index.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"expert index: expected i32 or i64, got {top_k_index.dtype}")
    flat = top_k_index.reshape(-1).long()
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= num_experts):
        raise IndexError(
            f"expert index out of range [0, {num_experts}): "
            f"min {int(flat.min())}, max {int(flat.max())}"
        )
    return flat


def expert_offsets(top_k_index: torch.Tensor, num_experts: int) -> torch.Tensor:
    """i32 [E]: offs[e] = the number of entries whose expert is <= e."""
    flat = _check_index(top_k_index, num_experts)
    counts = torch.bincount(flat, minlength=num_experts)
    return torch.cumsum(counts, 0).to(torch.int32)


def expert_order(top_k_index: torch.Tensor, num_experts: int) -> torch.Tensor:
    """i32 [numel]: the flat positions sorted by expert, ties by position (a stable sort)."""
    flat = _check_index(top_k_index, num_experts)
    return torch.sort(flat, stable=True).indices.to(torch.int32)


def _segments(offs: torch.Tensor, rows: int):
    """(expert, first row, end row) of each non-empty segment, the offsets read on the host."""
    if offs.dtype != torch.int32 or offs.dim() != 1:
        raise TypeError(f"offsets: expected i32 [E], got {offs.dtype}{list(offs.shape)}")
    ends = offs.tolist()
    lo = 0
    for e, hi in enumerate(ends):
        if hi < lo or hi > rows:
            raise IndexError(f"offsets not ascending within [0, {rows}]: {ends}")
        if hi > lo:
            yield e, lo, hi
        lo = hi


def expert_weight(weights, e: int) -> torch.Tensor:
    """Expert e's matrix: the e-th of E tensors, or the e-th slice of one fused [E, ., .] one."""
    return weights[0][e] if len(weights) == 1 and weights[0].dim() == 3 else weights[e]


def grouped_mm(a: torch.Tensor, offs: torch.Tensor, weights, weights_nk: bool) -> torch.Tensor:
    """out[r] = a[r] @ W_e^T ("nk") or a[r] @ W_e ("kn") for the rows of segment e, accumulated
    in f32 and rounded once to a's dtype; rows past the last offset are 0."""
    weights = list(weights)
    w0 = weights[0]
    n = w0.shape[-2] if weights_nk else w0.shape[-1]
    experts = offs.shape[0]
    fused = len(weights) == 1 and w0.dim() == 3 and w0.shape[0] == experts
    if not fused and not (len(weights) == experts and all(w.dim() == 2 for w in weights)):
        raise ValueError(
            f"grouped_mm: {len(weights)} weights of rank {w0.dim()} for {experts} experts"
        )
    out = torch.zeros(a.shape[0], n, dtype=a.dtype, device=a.device)
    for e, lo, hi in _segments(offs, a.shape[0]):
        w = expert_weight(weights, e).float()
        out[lo:hi] = (a[lo:hi].float() @ (w.t() if weights_nk else w)).to(a.dtype)
    return out


def grouped_mm_wgrad(g: torch.Tensor, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """out[e] = g[seg e]^T @ x[seg e] ([E, N, K], g's dtype), accumulated in f32; an empty segment
    gives zeros."""
    if g.shape[0] != x.shape[0]:
        raise ValueError(f"grouped_mm_wgrad: {g.shape[0]} rows of g, {x.shape[0]} of x")
    out = torch.zeros(offs.shape[0], g.shape[1], x.shape[1], dtype=g.dtype, device=g.device)
    for e, lo, hi in _segments(offs, g.shape[0]):
        out[e] = (g[lo:hi].float().t() @ x[lo:hi].float()).to(g.dtype)
    return out
