"""The ATen executor (executors/aten_executor.py) against eager PyTorch: the node list GraphBuilder
records, interpreted with ATen ops and checked against the core's types. Every test here forces
DYNGEN_EXECUTOR=reference and fails if anything is compiled for the C executor, so these are the
tests of the ATen executor whatever the environment asks for (scripts/test.sh runs the rest of
the suite on the generated kernels)."""

import copy

import pytest
import test_ops_coverage as cov
import torch
from helpers import Routed, build_expert, routed_inputs

import dyngen
import dyngen.aot
from dyngen.core.ir import GraphBuilder, SymList
from dyngen.core.ops import DType
from dyngen.errors import LaunchError
from dyngen.executors import aten_executor, runtime
from dyngen.options import options, set_options


@pytest.fixture
def aten_only(fresh, monkeypatch):
    """Forces the ATen executor; counts its runs; refuses any C compile."""
    saved = options()
    set_options(executor="reference", strict=True)
    # What CPU tensors run on is decided once per process (runtime.executor_kind): decided here
    # under the forced option, and put back afterwards for the tests that follow.
    monkeypatch.setattr(runtime, "_kind", None)
    runs = []
    real_run = aten_executor.AtenGraphRunner.run
    monkeypatch.setattr(
        aten_executor.AtenGraphRunner,
        "run",
        lambda self, ins: runs.append(self.key) or real_run(self, ins),
    )
    monkeypatch.setattr(
        runtime, "_compile_capi", lambda *a, **k: pytest.fail("compiled for the C executor")
    )
    yield runs
    set_options(**saved.__dict__)


def test_aten_executor_seed_forward_backward_every_size_one_compile(aten_only):
    """The seed (routed LoRA expert, bf16 with fp32 adapters): forward and backward against eager
    for several token counts; after the first size nothing new is compiled."""
    torch.manual_seed(0)
    expert = build_expert(64, 32, 4, 8)
    eager = copy.deepcopy(expert)
    compiled = torch.compile(Routed(expert), backend=dyngen.aot.backend, dynamic=True)
    calls = []
    for step, n in enumerate((3, 7, 12, 30)):
        x, mask = routed_inputs(40, n, 64, seed=step)
        x_ref = x.detach().clone().requires_grad_(True)
        got, want = compiled(x, mask), Routed(eager)(x_ref, mask)
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
        got.float().square().sum().backward()
        want.float().square().sum().backward()
        torch.testing.assert_close(x.grad, x_ref.grad, atol=2e-2, rtol=2e-2)
        calls.append(dyngen.stats()["backend_calls"])
    grads = {k: p.grad for k, p in expert.named_parameters() if p.requires_grad}
    for k, p in eager.named_parameters():
        if p.requires_grad:
            torch.testing.assert_close(grads[k], p.grad, atol=5e-2, rtol=5e-2, msg=k)
    assert dyngen.stats()["fallbacks"] == []
    assert calls[1] == calls[-1] >= 1, calls  # one compile for every size
    assert len(aten_only) >= 8  # forward and backward for each of the 4 sizes


@pytest.mark.parametrize(
    "case",
    [
        lambda: cov.test_unary_trig_erf_sinc(None, torch.sin),
        lambda: cov.test_unary_trig_erf_sinc(None, torch.cos),
        lambda: cov.test_unary_trig_erf_sinc(None, torch.erf),
        lambda: cov.test_unary_trig_erf_sinc(None, torch.sinc),
        lambda: cov.test_sinc_at_zero_and_integers(None),
        lambda: cov.test_gelu_and_its_backward(None, "none", torch.float32),
        lambda: cov.test_gelu_and_its_backward(None, "tanh", torch.bfloat16),
        lambda: cov.test_select_and_select_backward(None),
        lambda: cov.test_index_put_with_and_without_accumulate(None),
        lambda: cov.test_arange(None),
        lambda: cov.test_cumsum(None),
        lambda: cov.test_clamp_and_where_with_scalars(None),
        lambda: cov.test_constant_pad_nd(None),
        lambda: cov.test_cross_entropy_nll_loss(None, "mean"),
        lambda: cov.test_cross_entropy_nll_loss(None, "none"),
        lambda: cov.test_symbolic_comparison_in_graph(None),
        lambda: cov.test_float16_end_to_end(None),
    ],
    ids=[
        "sin",
        "cos",
        "erf",
        "sinc",
        "sinc_zero",
        "gelu",
        "gelu_tanh_bf16",
        "select",
        "index_put",
        "arange",
        "cumsum",
        "clamp_where",
        "pad",
        "cross_entropy_mean",
        "cross_entropy_none",
        "sym_compare",
        "float16",
    ],
)
def test_aten_executor_thunder_coverage_ops_match_eager(aten_only, case):
    """The ops added for ThunderFX coverage through AOTAutograd, forward and backward, against
    eager."""
    case()
    assert aten_only, "nothing ran on the ATen executor"


def _gather_scatter_graph():
    b = GraphBuilder("gather_scatter.test")
    s0 = b.symbol("s0", lo=2, hi=64)
    x = b.input(DType.F32, [s0, 5])
    idx = b.input(DType.I64, [s0, 3])
    picked = b.op("gather", [x, idx], {"dim": 1})
    zeros = b.op("full", [], {"dtype": DType.F32, "shape": SymList([s0, 5]), "value": 0.0})
    spread = b.op("scatter", [zeros, idx, picked], {"dim": 1})
    rows = b.op("sym_constant", [], {"dtype": DType.I64, "value": SymList([s0 * 2])})
    b.output(picked)
    b.output(spread)
    b.output(b.op("cumsum", [x], {"dim": 0, "dtype": DType.F32}))
    b.output(rows)
    return b.finish()


def test_aten_executor_builder_graph_matches_torch(aten_only):
    """A graph built node by node (gather, scatter, full, cumsum, sym_constant) against ATen."""
    exe = runtime.compile_ir(_gather_scatter_graph(), "gs")
    assert exe.kind == "reference"
    for n in (2, 9):
        x, idx = torch.randn(n, 5), torch.randint(0, 5, (n, 3))
        picked, spread, csum, rows = exe.run([x, idx])
        want = torch.gather(x, 1, idx)
        torch.testing.assert_close(picked, want)
        torch.testing.assert_close(spread, torch.zeros(n, 5).scatter(1, idx, want))
        torch.testing.assert_close(csum, torch.cumsum(x, 0))
        assert rows.item() == 2 * n and rows.dtype == torch.int64
        assert exe.prepare([x, idx])[0] == ((n, 3), torch.float32)


def test_aten_executor_checks_inputs_against_facts(aten_only):
    exe = runtime.compile_ir(_gather_scatter_graph(), "gs")
    with pytest.raises(LaunchError, match=r"s0 = 65 is outside its facts"):
        exe.run([torch.randn(65, 5), torch.zeros(65, 3, dtype=torch.int64)])
    with pytest.raises(LaunchError, match=r"input 1 dim 0: expected s0 = 4, got 5"):
        exe.run([torch.randn(4, 5), torch.zeros(5, 3, dtype=torch.int64)])
    with pytest.raises(LaunchError, match=r"input 1: expected i64"):
        exe.run([torch.randn(4, 5), torch.zeros(4, 3, dtype=torch.int32)])


def test_aten_executor_refuses_what_it_cannot_evaluate(aten_only, monkeypatch):
    """An op without an evaluation, or a result that disagrees with the core's type, is an error
    naming the op, never an answer."""
    exe = runtime.compile_ir(_gather_scatter_graph(), "gs")
    ins = [torch.randn(3, 5), torch.zeros(3, 3, dtype=torch.int64)]
    nodes = exe.graph.nodes  # the executable may be the memory cache's: restored below
    node = nodes[0]
    nodes[0] = type(node)("not_an_op", node.inputs, node.attrs, node.output)
    try:
        with pytest.raises(LaunchError, match=r"no evaluation for op not_an_op"):
            exe.run(ins)
    finally:
        nodes[0] = node
    monkeypatch.setitem(aten_executor._UNARY, "exp", lambda x: x.double())
    b = GraphBuilder("exp.test")
    x = b.input(DType.F32, [b.symbol("s0")])
    b.output(b.op("exp", [x]))
    with pytest.raises(LaunchError, match=r"= exp gave torch.float64\[4\], the IR says f32\[s0\]"):
        runtime.compile_ir(b.finish(), "exp").run([torch.randn(4)])


def test_aten_executor_refuses_text_graphs(aten_only):
    """A graph the core parsed has no node list: DYNGEN_EXECUTOR=reference says so."""
    with pytest.raises(ValueError, match="runs graphs built by GraphBuilder"):
        dyngen.compile_text(_gather_scatter_graph().text, "gs")
