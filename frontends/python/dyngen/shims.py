"""Process-wide shims that `dyngen.thunderfx.compile` installs: each works around one Dynamo
limitation that would break a model's graph, keeps eager's semantics exactly, is recorded in
`dyngen.stats()["shims"]`, and can be removed.

Note [SDPA is_causal under dynamic shapes]
transformers' attention computes `is_causal = causal_mask is None and q_len > 1` and passes it to
`torch.nn.functional.scaled_dot_product_attention`. With the sequence length symbolic, `q_len > 1`
is a SymBool, and torch 2.11's Dynamo breaks the graph at the call ("argument 'is_causal' must be
bool, not SymBool"): each decoder layer then splits in two at its attention. Branching on the
SymBool in Python code Dynamo inlines (`True if is_causal else False`) lets Dynamo decide it from
the symbol's range (a dynamic size is at least 2, so `q_len > 1` holds with no guard) and pass a
constant. `bool(x)` would not do: Dynamo keeps it symbolic. `enable_gqa` gets the same treatment:
`kv_heads != heads` is a SymBool when Dynamo made the head count a symbol, and inside the wrapper
(unlike a direct call) the SymBool reached the builtin and broke the graph. The wrapper calls the
original function with the same arguments; in eager, both are already bools and nothing changes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import counters

_installed: dict[str, object] = {}  # shim name -> the original it replaced


def _sdpa_with_constant_is_causal(original):
    def scaled_dot_product_attention(
        query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs
    ):
        is_causal = True if is_causal else False  # noqa: SIM210 - Note [SDPA is_causal under dynamic shapes]
        if "enable_gqa" in kwargs:  # the same for the other bool flag (a head-count comparison)
            kwargs["enable_gqa"] = True if kwargs["enable_gqa"] else False  # noqa: SIM210
        return original(
            query,
            key,
            value,
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            is_causal=is_causal,
            scale=scale,
            **kwargs,
        )

    scaled_dot_product_attention.__wrapped__ = original
    scaled_dot_product_attention.__doc__ = original.__doc__
    return scaled_dot_product_attention


SDPA = "torch.nn.functional.scaled_dot_product_attention: is_causal made a constant"


def install() -> list[str]:
    """Installs every shim once per process; returns the names of those installed."""
    if SDPA not in _installed:
        _installed[SDPA] = F.scaled_dot_product_attention
        torch.nn.functional.scaled_dot_product_attention = _sdpa_with_constant_is_causal(
            F.scaled_dot_product_attention
        )
    counters.note_shims(_installed)
    return list(_installed)


def remove() -> None:
    """Puts the originals back (tests; a process that no longer compiles with dyngen)."""
    original = _installed.pop(SDPA, None)
    if original is not None:
        torch.nn.functional.scaled_dot_product_attention = original
    counters.note_shims(_installed)


def installed() -> list[str]:
    return list(_installed)
