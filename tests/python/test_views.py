"""Note [Outputs that are views]: a graph output that is a view of an input (the attention's
`value_states = v.view(1, s, heads, d).transpose(1, 2)` when FSDP2's graph breaks leave it alone in
a graph with the rotary embedding) comes back as a true view, so AOTAutograd's alias regeneration
reads the right elements; before, it came back 140% off with no warning."""

import torch

import dyngen.aot
import dyngen.moe.ops  # noqa: F401  (registers torch.ops.dyngen.*)
from dyngen import graph_check
from dyngen.views import view_replay


def attention_inputs(q, v, cos, sin):
    s = q.shape[1]
    q = q.view(1, s, 4, 16).transpose(1, 2)
    value = v.view(1, s, 4, 16).transpose(1, 2)
    half = torch.cat((-q[..., 8:], q[..., :8]), dim=-1)
    return q * cos.unsqueeze(1) + half * sin.unsqueeze(1), value, v[:, 1:, 8:]


def args(s):
    g = torch.Generator().manual_seed(s)
    q, v = (torch.randn(1, s, 64, generator=g).bfloat16().requires_grad_() for _ in range(2))
    cos, sin = (torch.randn(1, s, 16, generator=g).bfloat16() for _ in range(2))
    return q, v, cos, sin


def test_view_outputs_match_eager_for_every_size(fresh):
    compiled = torch.compile(attention_inputs, backend=dyngen.aot.backend, dynamic=True)
    for s in (5, 12, 7):
        a = args(s)
        got, want = compiled(*a), attention_inputs(*a)
        for i, (g, w) in enumerate(zip(got, want)):
            torch.testing.assert_close(g, w, rtol=0, atol=0)
            if i > 0:  # the views: eager's layout, and views of the caller's tensor
                assert g.stride() == w.stride() and g._base is a[1], (s, g.stride(), w.stride())
        ga = torch.autograd.grad([g.float().sum() for g in got], a[:2])
        wa = torch.autograd.grad([w.float().sum() for w in want], a[:2])
        for g, w in zip(ga, wa):
            torch.testing.assert_close(g, w)
    assert dyngen.stats()["fallbacks"] == []


def test_view_replay_picks_only_views_of_inputs_and_outputs():
    def f(x):
        y = x * 2
        return y, x.t(), y[1:], y.sum()

    gm = torch.fx.symbolic_trace(f)
    for n in gm.graph.nodes:  # symbolic_trace leaves Python calls: make them ATen overloads
        if n.op == "call_method" and n.target == "t":
            n.op, n.target = "call_function", torch.ops.aten.t.default
        elif n.op == "call_function" and n.target.__name__ == "getitem":
            n.target, n.args = torch.ops.aten.slice.Tensor, (n.args[0], 0, 1, None)
    gm.recompile()
    picked, replay = view_replay(gm)
    assert picked == [1, 2]
    x = torch.randn(3, 3)
    y = x * 2
    t, sl = replay(x, y, None, None, None)
    assert t._base is x and sl._base is y


def test_graph_check_flags_a_wrong_graph(fresh):
    graph_check.enable(1)
    try:

        def wrong(gm, example_inputs):
            return lambda *xs: tuple(o + 1 for o in gm(*xs))

        f = torch.compile(lambda x: (x.sin(),), backend=graph_check.wrap_backend(wrong))
        f(torch.randn(4, requires_grad=True))
        bad = [r for r in graph_check.report() if r["bad"]]
        assert bad and bad[0]["fwd_rel"] > 0.1, graph_check.report()
    finally:
        graph_check.enable(None)
        graph_check.reset()


def per_expert_linear(x, offs, w0, w1, w2, w3):
    return torch.ops.dyngen.grouped_mm(x, offs, [w0, w1, w2, w3], True)


def test_per_expert_gradients_are_views_of_one_weight_gradient(fresh):
    """Note [Outputs that slice one intermediate]: the backward's E selects of the grouped weight
    gradient come back as views of one tensor, with eager's values (empty experts: zeros)."""
    compiled = torch.compile(per_expert_linear, backend=dyngen.aot.backend, dynamic=True)
    for counts in ([2, 0, 5, 0], [1, 3, 3, 5]):
        g = torch.Generator().manual_seed(sum(counts))
        rows = sum(counts)
        offs = torch.cumsum(torch.tensor(counts), 0).to(torch.int32)
        x = torch.randn(rows, 32, generator=g).bfloat16()
        ws = [torch.randn(16, 32, generator=g).bfloat16() for _ in range(4)]
        dy = torch.randn(rows, 16, generator=g).bfloat16()
        grads = []
        for fn in (compiled, per_expert_linear):
            leaves = [t.clone().requires_grad_() for t in [x, *ws]]
            fn(leaves[0], offs, *leaves[1:]).backward(dy)
            grads.append([t.grad for t in leaves])
        for got, want in zip(*grads):
            torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
        storages = {w.untyped_storage().data_ptr() for w in grads[0][1:]}
        assert len(storages) == 1, "each expert's gradient was a tensor of its own"
        for e, c in enumerate(counts):
            assert (grads[0][1 + e].abs().sum() == 0) == (c == 0), (counts, e)
    assert dyngen.stats()["fallbacks"] == []


def test_selects_are_grouped_only_when_they_cover_the_dim():
    from dyngen.view_bases import group_select_outputs

    def graph(covering: bool):
        g = torch.fx.Graph()
        x = g.placeholder("x")
        x.meta["val"] = torch.empty(3, 4)
        y = g.call_function(torch.ops.aten.mul.Tensor, (x, 2))
        y.meta["val"] = torch.empty(3, 4)
        picks = range(3) if covering else (0, 2)
        g.output(tuple(g.call_function(torch.ops.aten.select.int, (y, 0, i)) for i in picks))
        return torch.fx.GraphModule(torch.nn.Module(), g)

    assert group_select_outputs(graph(covering=False)) is None
    grouped = group_select_outputs(graph(covering=True))
    outs = grouped.wrap(grouped.gm)(torch.arange(12.0).view(3, 4))
    assert [o.tolist() for o in outs] == [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18, 20, 22]]
    assert outs[0]._base is outs[2]._base
