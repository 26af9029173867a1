"""FX -> IR handlers for routing by expert the way transformers 5's grouped_mm experts write it:
sort of expert ids, histc of them, floor_divide of the positions (Note [Sorting expert ids]).
Registered into registry.HANDLERS.

Note [Sorting expert ids]
transformers 5 (integrations/moe.py, grouped_mm_experts_forward) routes with
    ids_g, perm = torch.sort(top_k_index.reshape(-1))
    hidden[perm // k], weights[perm]
    offsets = torch.cumsum(torch.histc(ids_g.float(), bins=E, min=0, max=E-1), 0, dtype=int32)
The IR has no sort; it has the stable counting sort of expert ids, expert_order, and their
inclusive counts, expert_offsets (Note [Grouped experts ops] in ir/shape_infer_grouped.cc), both
over ids in [0, E). So sort(x) of a 1-D integer tensor, ascending, is lowered when E is known:
  - x is the indices of a topk over a dim of size E (through views and integer casts): its values
    are in [0, E) by construction;
  - or the sorted values are used only by histc(bins=E, min=0, max=E-1) (through casts), which is
    what transformers does when the experts are a Dynamo graph of their own and the ids arrive as
    an input. Then nothing proves the range at compile time; the counting sort checks every id at
    run time (Note [Bad expert indices] in codegen/emit_moe_route.cc): an id outside [0, E) is an
    error where torch would sort it and histc drop it. Transformers' expert-parallel sentinels
    (ids >= E, clamped afterwards) are such ids, so a graph that uses the sorted values for anything
    else (the clamp, the sentinel mask) is not lowered.
Then indices = expert_order(x) as i64 and values = x[indices]. Anything else (descending, a
multi-dimensional x, floats, ids of unknown range) is Unsupported and runs as ATen.

Ties. torch.sort(stable=False) leaves the order of equal keys unspecified; ours is stable (the
order of the input), which is one of the orders torch may return, and exactly torch's with
stable=True. The experts graph does not depend on it beyond f32 summation order: within one
expert's segment each row is multiplied by the same weight on its own, inv_perm sends every row
back to its (token, slot) place, and the sum over a token's k slots runs in slot order; only the
weight gradient (grouped_mm_wgrad) sums a segment's rows, in segment order.

histc(ids, bins=E, min=0, max=E-1) of ids in [0, E) is a bincount (id v falls in bin v: bin
floor(v E / (E - 1)) is v for v < E - 1, and the top edge E - 1 belongs to the last bin), so it is
the differences of expert_offsets. Other histc forms are Unsupported.

floor_divide(a, k) of an integer tensor by a non-zero integer constant: the IR's integers have no
division, so q = trunc(f64(a) / k), corrected by one where a - q k lies outside [0, k) (or (k, 0]
for k < 0): exact while f64 holds a exactly, so the dividend must be at most 32 bits wide or an
index (positions of a sort, topk or arange, below 2^53).
"""

from __future__ import annotations

import operator

import torch
import torch.fx

from ..core.ir import SymList
from ..core.ops import DType
from ..errors import Unsupported
from .registry import register
from .values import Ref, meta_val

# Ops whose result holds the same integer values as their first operand.
_SAME_VALUES = {
    "view",
    "reshape",
    "_unsafe_view",
    "flatten",
    "squeeze",
    "unsqueeze",
    "clone",
    "contiguous",
    "alias",
    "detach",
}
_CASTS = {"_to_copy", "to", "convert_element_type", "long", "int", "float", "double"}


def _name(n) -> str:
    if not isinstance(n, torch.fx.Node) or n.op not in ("call_function", "call_method"):
        return ""
    if n.target is operator.getitem:
        return "getitem"
    if n.op == "call_method":
        return n.target
    return getattr(getattr(n.target, "overloadpacket", n.target), "__name__", "")


def _int_dtype(n) -> torch.dtype | None:
    v = meta_val(n) if isinstance(n, torch.fx.Node) else None
    if isinstance(v, torch.Tensor) and not v.dtype.is_floating_point and v.dtype != torch.bool:
        return v.dtype
    return None


def _through_casts(n, integer_only: bool):
    """n's source through value-preserving views and casts (integer to integer when integer_only,
    else also to float, which holds small integers exactly)."""
    while True:
        name = _name(n)
        src = n.args[0] if name and n.args else None
        if name in _SAME_VALUES or (
            name in _CASTS and _int_dtype(src) and (not integer_only or _int_dtype(n))
        ):
            n = src
        else:
            return n


def _holds(dtype: torch.dtype, bound: int) -> bool:
    return torch.iinfo(dtype).max >= bound - 1


def index_bound(n) -> int | None:
    """E when n's integer values are known to lie in [0, E) (Note [Sorting expert ids]): indices
    of a topk over a dim of size E, or the values of a sort lowered onto the counting sort."""
    n = _through_casts(n, integer_only=True)
    if _name(n) != "getitem" or not isinstance(n.args[0], torch.fx.Node):
        return None
    src, which = n.args[0], n.args[1]
    if _name(src) == "topk" and which == 1:
        x, dim = meta_val(src.args[0]), src.args[2] if len(src.args) > 2 else -1
        dim = src.kwargs.get("dim", dim)
        size = x.shape[dim] if isinstance(x, torch.Tensor) and x.dim() else None
        return size if isinstance(size, int) else None
    if _name(src) == "sort" and which == 0:
        return _sort_bound(src)[0]
    return None


def _histc_form(n) -> int | None:
    """E when n is histc(x, bins=E, min=0, max=E-1), E >= 2 (args or keywords)."""
    if _name(n) != "histc":
        return None
    names = ("input", "bins", "min", "max")
    a = dict(zip(names, n.args))
    a.update({k: v for k, v in n.kwargs.items() if k in names})
    bins, lo, hi = a.get("bins", 100), a.get("min", 0), a.get("max", 0)
    if isinstance(bins, int) and bins >= 2 and lo == 0 and hi == bins - 1:
        return bins
    return None


def _sort_bound(sort_node) -> tuple[int | None, str]:
    """(E, "") when the sort's input ids are in [0, E) (Note [Sorting expert ids]), else
    (None, why not)."""
    bound = index_bound(sort_node.args[0])
    if bound is not None:
        return bound, ""
    values = [u for u in sort_node.users if _name(u) == "getitem" and u.args[1] == 0]
    seen, ends = list(values), []
    while seen:
        u = seen.pop()
        for user in u.users:
            if _name(user) in _CASTS or _name(user) in _SAME_VALUES:
                seen.append(user)
            elif _histc_form(user) is not None:
                ends.append(_histc_form(user))
            else:
                return None, f"its values are used by {user.target}, not only by histc"
    if not ends:
        return None, "its input is not the indices of a topk and no histc(bins=E) counts it"
    if len(set(ends)) != 1:
        return None, f"histc counts its values in {sorted(set(ends))} bins"
    return ends[0], ""


def sort(c, x, dim=-1, descending=False, *, stable=None):
    node = c.node
    t = c.type(x)
    if t.rank != 1 or t.dtype.is_float or t.dtype == DType.BOOL or descending:
        why = "descending" if descending else f"a {t} operand"
        raise Unsupported(f"op sort: {why} (only ascending 1-D expert ids are lowered)")
    bound, why = _sort_bound(node)
    if bound is None:
        raise Unsupported(f"op sort of ids of unknown range: {why}")
    ids = x if t.dtype in (DType.I32, DType.I64) else c.cast(x, DType.I32)
    order = c.op("expert_order", [ids], {"num_experts": bound})
    indices = c.cast(order, DType.I64)
    return c.op("index_select", [x, indices], {"dim": 0}), indices


def argsort(c, x, dim=-1, descending=False, *, stable=None):
    return sort(c, x, dim, descending, stable=stable)[1]


def histc(c, x, bins=100, min=0, max=0):  # noqa: A002 - PyTorch's argument names
    bound = _histc_form(c.node)
    ids_node = _through_casts(c.node.args[0], integer_only=False)
    known = index_bound(ids_node) if _int_dtype(ids_node) else None
    if bound is None or known is None or known > bound:
        form = f"histc(bins={bins}, min={min}, max={max})"
        raise Unsupported(f"op {form}: only bins=E, min=0, max=E-1 of expert ids in [0, E)")
    # The integer ids where this export has them; a node probed on its own (the partitioner's
    # unsupported_reason) has only its float operand, whose values are those integers exactly.
    ids = c.ex.env.get(ids_node)
    ids = ids if isinstance(ids, Ref) else c.tensor(x)
    if c.type(ids).dtype not in (DType.I32, DType.I64):
        ids = c.cast(ids, DType.I32)
    offs = c.op("expert_offsets", [ids], {"num_experts": bound})
    head = c.op("full", [], {"dtype": DType.I32, "shape": SymList([1]), "value": 0})
    attrs = {"dim": 0, "start": SymList([0]), "end": SymList([bound - 1]), "step": 1}
    before = c.op("cat", [head, c.op("slice", [offs], attrs)], {"dim": 0})
    return c.cast(c.op("sub", [offs, before]), c.out_dtype())


def _below_2_53(n) -> bool:
    """Whether n's integers are exact in f64: a dtype of at most 32 bits, or positions (indices of
    a sort or topk, arange), which are below any tensor's numel."""
    dtype = _int_dtype(n)
    if dtype is not None and torch.iinfo(dtype).bits <= 32:
        return True
    n = _through_casts(n, integer_only=True)
    if _name(n) == "arange" or index_bound(n) is not None:
        return True
    return _name(n) == "getitem" and _name(n.args[0]) in ("sort", "topk") and n.args[1] == 1


def floor_divide(c, a, b):
    """Note [Sorting expert ids]: floor division of integers by a constant, through f64."""
    k = b.as_const() if hasattr(b, "as_const") else b
    if not isinstance(a, Ref) or not isinstance(k, int) or isinstance(k, bool) or k == 0:
        raise Unsupported(f"op floor_divide by {b!r}: only an integer tensor by a constant")
    dtype = c.type(a).dtype
    if dtype.is_float or dtype == DType.BOOL or not _below_2_53(c.node.args[0]):
        raise Unsupported(f"op floor_divide of {c.type(a)}: not an integer tensor exact in f64")
    a64 = c.cast(a, DType.I64)
    q = c.cast(c.op("div", [c.cast(a64, DType.F64), c.const(float(k), DType.F64)]), DType.I64)
    r = c.op("sub", [a64, c.op("mul", [q, c.const(k, DType.I64)])])
    # The remainder of floor division lies in [0, k - 1] (k > 0) or [k + 1, 0] (k < 0); one
    # step of q moves it by k.
    low, high = (c.const(0), c.const(k - 1)) if k > 0 else (c.const(k + 1), c.const(0))
    under = c.cast(c.op("lt", [r, low]), DType.I64)
    over = c.cast(c.op("gt", [r, high]), DType.I64)
    if k < 0:
        under, over = over, under
    q = c.op("add", [c.op("sub", [q, under]), over])
    return c.cast(q, c.out_dtype())


register(
    {
        "sort": sort,
        "argsort": argsort,
        "histc": histc,
        "floor_divide": floor_divide,
        "floordiv": floor_divide,  # operator.floordiv of a tensor in a Dynamo graph
    }
)
