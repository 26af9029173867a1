"""export.unsupported_reason: per FX node, None when the exporter takes it, else the reason naming
the op (the partitioner's question); and it agrees with a whole-graph export."""

import torch
from test_export import capture

import dyngen
from dyngen.fx.export import unsupported_reason


def _reasons(gm):
    return {n.name: unsupported_reason(n) for n in gm.graph.nodes}


def test_supported_nodes_give_none(fresh):
    def f(x, w):
        return torch.nn.functional.silu(x @ w).sum(-1) + 1

    graphs = capture(f, [(torch.randn(6, 4), torch.randn(4, 3))], dynamic=True)
    gm, ex = graphs[0]
    assert all(r is None for r in _reasons(gm).values()), _reasons(gm)
    dyngen.export(gm, ex)  # the whole graph exports too


def test_unknown_op_is_named(fresh):
    def f(x):
        return torch.nn.functional.silu(x) * torch.special.i0(x)

    gm, ex = capture(f, [(torch.randn(6, 4),)], dynamic=True)[0]
    reasons = {n.target: unsupported_reason(n) for n in gm.graph.nodes if n.op == "call_function"}
    assert reasons[torch.nn.functional.silu] is None
    assert "i0" in reasons[torch.special.i0]


def test_unsupported_arguments_are_reasons(fresh):
    """An op the exporter knows, with arguments it does not take: the node is refused."""

    def f(x):
        return torch.div(x, 3, rounding_mode="floor") + x

    gm, _ = capture(f, [(torch.randn(6, 4),)], dynamic=True)[0]
    reasons = [unsupported_reason(n) for n in gm.graph.nodes if n.op == "call_function"]
    assert any(r and "rounding_mode" in r for r in reasons), reasons
    assert reasons[-1] is None  # the add


def test_unsupported_dtype_is_a_reason(fresh):
    gm, _ = capture(lambda x: x * 2, [(torch.randn(6, 4).to(torch.complex64),)], dynamic=True)[0]
    for n in gm.graph.nodes:
        if n.op == "call_function" or (n.op == "placeholder" and "x" in n.name):
            assert "complex64" in (unsupported_reason(n) or ""), n.name
