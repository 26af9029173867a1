"""dyngen.thunderfx as a drop-in for thunder.dynamo.thunderfx: the object it returns, partial
graphs, graphs whose symbols are made inside them, and static graphs Thunder fails on."""

import pytest
import torch
from thunder.dynamo import ThunderCompiler, ThunderFXCompiledObject

import dyngen
import dyngen.thunderfx
from dyngen.thunderfx import DyngenCompiler, is_dynamic


@pytest.fixture(autouse=True)
def _fallbacks_allowed():
    """These tests exercise what dyngen does instead of failing (partial graphs, Thunder failures
    run eagerly), so strict mode, which turns each into an error, is off here."""
    from dyngen.options import options, set_options

    old = options().strict
    set_options(strict=False)
    yield
    set_options(strict=old)


def test_compile_returns_thunders_object(fresh):
    def f(x):
        return torch.nn.functional.silu(x) * 2 + x

    c = dyngen.thunderfx.compile(f)
    x = torch.randn(4, 8)
    torch.testing.assert_close(c(x), f(x))
    assert isinstance(c, ThunderFXCompiledObject) and isinstance(c._backend, ThunderCompiler)
    assert c.backend is c._backend
    assert len(c._backend.subgraph_infos) == 1  # the static graph is Thunder's
    assert len(c.last_traces) == 1
    assert [g["kind"] for g in c.backend.graphs] == ["thunder"]
    s = dyngen.stats()
    assert s["graphs_where"]["thunder"] == 1 and s["ops_where"]["thunder"] >= 3


def _with_erfinv(x, w):
    h = torch.nn.functional.silu(x @ w)
    return torch.erfinv(torch.tanh(h) * 0.5) * 2 + h  # erfinv: not in dyngen's catalog


def test_partial_graph_compiles_the_rest_once_for_every_size(fresh):
    """The graph holds erfinv: dyngen compiles the regions around it, erfinv runs as an ATen op,
    forward and backward match eager, and new sizes compile nothing."""
    w = torch.randn(16, 8, requires_grad=True)
    c = dyngen.thunderfx.compile(_with_erfinv, dynamic=True)
    for step, n in enumerate((5, 9, 12)):
        x = torch.randn(n, 16, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        w_ref = w.detach().clone().requires_grad_(True)
        out = c(x, w)
        want = _with_erfinv(x_ref, w_ref)
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
        out.square().sum().backward()
        want.square().sum().backward()
        torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(w.grad, w_ref.grad, rtol=1e-4, atol=1e-4)
        w.grad = None
        if step == 0:
            first = dyngen.stats()
    s = dyngen.stats()
    assert s["graphs_compiled"] == first["graphs_compiled"] > 0  # one compile for every size
    assert s["graphs_where"]["partial"] == 2  # forward and backward
    assert s["ops_where"]["dyngen"] > 0 and s["ops_where"]["aten"] > 0
    assert s["graphs_where"]["thunder"] == 0 and s["thunder_cache_misses"] == 0
    reasons = " ".join(f["reason"] for f in s["fallbacks"])
    assert "erfinv" in reasons and "partly compiled by dyngen" in reasons
    parts = c.backend.graphs[0]["parts"]
    assert [p["where"] for p in parts] == ["partial", "partial"]


def test_a_symbol_made_inside_the_graph_makes_it_dynamic():
    """No placeholder is symbolic, but a node's value is (an unbacked size): dynamic."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    with FakeTensorMode(shape_env=env) as mode:
        x = mode.from_tensor(torch.zeros(4))
    g = torch.fx.Graph()
    p = g.placeholder("x")
    p.meta["example_value"] = x
    n = g.call_function(torch.ops.aten._local_scalar_dense.default, (p,))
    n.meta["example_value"] = env.create_unbacked_symint()
    g.output((n,))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    assert is_dynamic([x], gm)
    n.meta["example_value"] = 3
    assert not is_dynamic([x], gm)


def _refuse(self, gm, sample_args, **kw):
    raise KeyError("s34")  # what Thunder's splitter raised on PhiMoE's rotary graph


def test_static_graph_thunder_cannot_split_is_compiled_by_dyngen(fresh, monkeypatch):
    monkeypatch.setattr(ThunderCompiler, "__call__", _refuse)
    c = dyngen.thunderfx.compile(lambda x: x.exp() + 1)
    x = torch.randn(3, 5, requires_grad=True)
    out = c(x)
    torch.testing.assert_close(out, x.exp() + 1)
    torch.testing.assert_close(torch.autograd.grad(out.sum(), x)[0], x.exp())
    s = dyngen.stats()
    assert s["fallbacks"] == [], s["fallbacks"]
    rec = c.backend.graphs[0]
    assert rec["kind"] == "dyngen" and "KeyError" in rec["reason"], rec
    assert [p["where"] for p in rec["parts"]] == ["dyngen", "dyngen"], rec  # forward, backward
    assert s["graphs_where"]["eager"] == 0 and s["ops_where"]["dyngen"] > 0, s
    assert c._backend.subgraph_infos == []


def test_static_graph_both_thunder_and_dyngen_fail_on_runs_eagerly(fresh, monkeypatch):
    def broken(*a, **kw):
        raise RuntimeError("AOTAutograd failed")

    monkeypatch.setattr(ThunderCompiler, "__call__", _refuse)
    monkeypatch.setattr(dyngen.thunderfx, "compile_dynamic", broken)
    c = dyngen.thunderfx.compile(lambda x: x.exp() + 1)
    x = torch.randn(3, 5)
    torch.testing.assert_close(c(x), x.exp() + 1)
    s = dyngen.stats()
    assert len(s["fallbacks"]) == 1, s["fallbacks"]
    assert (
        "KeyError" in s["fallbacks"][0]["reason"]
        and "dyngen failed too" in s["fallbacks"][0]["reason"]
    )
    assert s["graphs_where"]["eager"] == 1 and c.backend.graphs[0]["kind"] == "eager"


class _NotFromFirstInput(torch.autograd.Function):
    """Under Thunder (this release) an autograd.Function whose output is not computed from its
    first input returns the wrong shape ([1] instead of x's): PhiMoE's MultiplierProcessor."""

    @staticmethod
    def forward(ctx, x, m):
        return m * 2

    @staticmethod
    def backward(ctx, g):
        return None, g * 2


def test_static_graph_with_wrong_thunder_outputs_is_compiled_by_dyngen(fresh):
    def f(x, m):
        return _NotFromFirstInput.apply(x, m) + 1

    c = dyngen.thunderfx.compile(f)
    x, m = torch.randn(6, 1), torch.randn(6, 1)
    out = c(x, m)
    torch.testing.assert_close(out, m * 2 + 1)
    s = dyngen.stats()
    assert s["fallbacks"] == [] and s["graphs_where"]["eager"] == 0, s
    rec = c.backend.graphs[0]
    if rec["kind"] == "dyngen":  # Thunder returned the wrong shape: caught, dyngen ran it
        assert "differ from Dynamo's" in rec["reason"] and s["ops_where"]["dyngen"] > 0, rec
    else:
        assert rec["kind"] == "thunder" and s["graphs_where"]["thunder"] == 1
    torch.testing.assert_close(c(x, m), m * 2 + 1)  # later calls stay right


def test_backend_goes_where_a_thunder_compiler_goes(fresh):
    b = dyngen.thunderfx.backend()
    assert isinstance(b, ThunderCompiler) and isinstance(b, DyngenCompiler)
    f = torch.compile(lambda x: torch.tanh(x) * x, backend=b, dynamic=True)
    for n in (3, 7):
        x = torch.randn(n, 4)
        torch.testing.assert_close(f(x), torch.tanh(x) * x)
    assert [g["kind"] for g in b.graphs] == ["dyngen"]
    assert [p["where"] for p in b.graphs[0]["parts"]] == ["dyngen"]
    assert dyngen.stats()["graphs_where"]["dyngen"] == 1


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
