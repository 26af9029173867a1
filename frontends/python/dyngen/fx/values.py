"""What the exporter and the op handler families share: tensor references and FX metadata."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx

from ..core.ir import IRTypeError
from ..core.ops import DType
from ..errors import ExportError, Unsupported


@dataclass(frozen=True)
class Ref:
    """A tensor value of the IR graph being built (distinct from Python ints in FX arguments)."""

    vid: int


def meta_val(node: torch.fx.Node):
    if "val" in node.meta:
        return node.meta["val"]
    return node.meta.get("example_value")


def symbol_sources(gm: torch.fx.GraphModule) -> dict:
    """Each sympy symbol -> (node, dim) where it first appears whole: a tensor's dim d, or a
    SymInt node's value (dim None)."""
    src: dict = {}
    for n in gm.graph.nodes:
        v = meta_val(n)
        if isinstance(v, torch.SymInt) and v.node.expr.is_Symbol:
            src.setdefault(v.node.expr, (n, None))
        elif isinstance(v, torch.Tensor):
            for d, s in enumerate(v.shape):
                if isinstance(s, torch.SymInt) and s.node.expr.is_Symbol:
                    src.setdefault(s.node.expr, (n, d))
    return src


def dtype_of(torch_dtype: torch.dtype, what: str) -> DType:
    d = DType.from_torch(torch_dtype)
    if d is None:
        raise Unsupported(f"dtype {torch_dtype} ({what})")
    return d


def type_error(n: torch.fx.Node, e: IRTypeError) -> ExportError:
    return ExportError(f"node {n.name} ({n.target}): {e}")
