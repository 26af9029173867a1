"""The executor seam: choice and stats, the ctypes binding's agreement with dyngen.h, dumps, and
the eager fallback."""

import ctypes
import logging
import re

import pytest
import torch
from conftest import REPO

import dyngen
import dyngen.thunderfx
from dyngen import counters
from dyngen.core import builder_api as _builder_api
from dyngen.core import capi as _capi
from dyngen.core.ir import GraphBuilder
from dyngen.core.ops import DType
from dyngen.executors import runtime
from dyngen.options import options, set_options

SEED_TEXT = (REPO / "tests" / "python" / "golden" / "seed_expert_mlp.ir").read_text()


@pytest.fixture
def opts():
    saved = options()
    yield set_options
    set_options(**saved.__dict__)


def test_executor_choice_is_recorded(monkeypatch):
    """CPU tensors' executor follows Note [Executor choice]; both need the library (One IR).
    Before any graph is compiled, stats()["executor"] names what CPU tensors would run on."""
    kind = dyngen.executor_kind()
    assert kind == runtime.plan_for(None)[0]
    monkeypatch.setattr(counters, "_executors", [])
    assert dyngen.stats()["executor"] == runtime.executor_name(*runtime.plan_for(None))


def test_stats_executor_names_what_the_graphs_run_on(opts, monkeypatch):
    """ "reference", "emulate" (the generated kernels on CPU tensors) and "cuda" (on a GPU or the
    driver double) apart, joined when a process used several; the C executor's counters are
    merged whatever CPU tensors use."""
    assert runtime.executor_name("reference", None) == "reference"
    assert runtime.executor_name("capi", "host") == "emulate"
    assert [runtime.executor_name("capi", t) for t in ("cuda:1", "sm_90a")] == ["cuda", "cuda"]
    monkeypatch.setattr(counters, "_executors", [])
    opts(executor="", target="", driver_double=False)  # CPU tensors: the ATen executor
    b = GraphBuilder("exp.test")
    x = b.input(DType.F32, [b.symbol("s0")])
    b.output(b.op("exp", [x]))
    runtime.compile_ir(b.finish(), "exp")
    assert dyngen.stats()["executor"] == "reference"
    before = dyngen.stats()["graphs_compiled"]
    exe = dyngen.compile_text(SEED_TEXT, "seed")  # text runs on the C executor: emulated
    assert exe.target == "host"
    s = dyngen.stats()
    assert s["executor"] == "emulate+reference"
    assert s["graphs_compiled"] == before + 1 and "launches" in s


def test_missing_library_is_a_clear_error(opts, tmp_path):
    opts(lib_path=str(tmp_path / "nope.so"))
    if any(p.is_file() for p in _capi.library_candidates()):
        pytest.skip("a libdyngen.so is installed")
    with pytest.raises(dyngen.LibraryNotFound, match=r"DYNGEN_LIB.*nope\.so \(absent\)"):
        _capi.load()


def test_ctypes_binding_matches_dyngen_h():
    header = (REPO / "runtime" / "dyngen.h").read_text()
    bound = set(_capi._SIGNATURES) | set(_builder_api._SIGNATURES)
    for name in bound:
        assert re.search(rf"\b{name}\(", header), f"{name} is not declared in dyngen.h"
    declared = set(re.findall(r"\b(dg_\w+)\(", header))
    assert declared == bound
    # dg_stats has one int64_t per line of the counter list (runtime/dyngen_stats.def).
    stats = re.search(r"typedef struct dg_stats \{(.*?)\} dg_stats;", header, re.S).group(1)
    assert re.findall(r"int64_t (\w+);", stats) == ["name"]
    assert '#include "dyngen_stats.def"' in stats
    listed = (REPO / "runtime" / "dyngen_stats.def").read_text()
    listed = re.findall(r"^DG_STAT\((\w+),", listed, re.M)
    assert listed == [f for f, _ in _capi.DgStats._fields_]
    assert ctypes.sizeof(_capi.DgStats) == 8 * len(listed)
    assert ctypes.sizeof(_capi.DgTensor) == 8 + 8 * _capi.DG_MAX_RANK + 4 * 4
    # The layout Note [Packing dg_tensor arguments] packs.
    assert _capi._DG_TENSOR.size == ctypes.sizeof(_capi.DgTensor)
    t = _capi._to_dg(torch.zeros(3, 5, dtype=torch.bfloat16))
    assert (t.rank, t.dtype, list(t.shape)) == (2, 1, [3, 5, 0, 0, 0, 0, 0, 0])
    s = _capi._to_dg(7)
    assert (s.data, s.rank, s.shape[0]) == (None, -1, 7)
    assert re.search(r"#define DG_MAX_RANK (\d+)", header).group(1) == str(_capi.DG_MAX_RANK)


def test_every_library_counter_is_in_stats():
    """A counter is one line of runtime/dyngen_stats.def: the library describes its counters and
    dyngen.stats() has every one of them, with nothing listed on the Python side."""
    docs = _capi.stat_docs()
    assert docs and all(docs.values())
    assert list(_capi.get_stats()) == list(docs) == [f for f, _ in _capi.DgStats._fields_]
    s = dyngen.stats()
    assert [name for name in docs if name not in s] == []
    assert all(isinstance(s[name], int) for name in docs)
    lib = _capi.load()
    assert lib.dg_stats_name(len(docs)) is None and lib.dg_stats_doc(-1) is None


def test_one_version():
    """Note [One version]: dyngen/VERSION is the package's version and the library's."""
    written = (REPO / "frontends" / "python" / "dyngen" / "VERSION").read_text().strip()
    assert dyngen.__version__ == written
    assert _capi.load().dg_version().decode() == written


def _seed_inputs(n):
    """Inputs for the golden seed graph (its input lines) with s0 = n."""
    ins = []
    for line in SEED_TEXT.splitlines():
        m = re.match(r"input %\d+: (?:sym s0|(\w+)\[(.*)\])$", line)
        if not m:
            continue
        if m.group(1) is None:
            ins.append(n)
            continue
        shape = [n if d == "s0" else int(d) for d in m.group(2).split(", ")]
        dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[m.group(1)]
        ins.append((torch.randn(shape) * 0.05).to(dtype))
    return ins


def test_core_binds_and_checks_symbols():
    exe = dyngen.compile_text(SEED_TEXT, "seed")
    for n in (2, 3):
        ins = _seed_inputs(n)
        assert exe.prepare(ins) == [((n, 2048), torch.bfloat16)]
    ins = _seed_inputs(4)
    ins[1] = 5  # the sym input (first sight of s0) disagrees with x's rows
    with pytest.raises(dyngen.LaunchError):
        exe.prepare(ins)
    ins = _seed_inputs(1)  # Dynamo's facts: s0 >= 2
    with pytest.raises(dyngen.LaunchError):
        exe.prepare(ins)


def test_reset_stats():
    exe = dyngen.compile_text(SEED_TEXT, "a")
    assert exe.kind == "capi"  # a graph given as text runs on the C executor
    assert runtime.executor_name("capi", exe.target) in dyngen.stats()["executor"].split("+")
    dyngen.reset_stats()
    assert dyngen.stats()["graphs_compiled"] == 0


def test_fallback_is_partial_for_every_size_with_reason(fresh, opts, tmp_path, caplog):
    """An op outside the catalog: the graph runs in part as ATen ops (no per-shape recompile),
    the reason is recorded and warned about once; DYNGEN_DUMP writes what was exported;
    DYNGEN_LOG=info logs it."""
    opts(dump_dir=str(tmp_path), log="info", strict=False)

    def f(x, w):
        return torch.erfinv(torch.tanh(x @ w) * 0.5)

    compiled = dyngen.thunderfx.compile(f, dynamic=True)
    w = torch.randn(8, 4)
    warning = r"graph0\.inference runs in part as ATen ops: .*op erfinv"
    with (
        caplog.at_level(logging.INFO, logger="dyngen"),
        pytest.warns(dyngen.FallbackWarning, match=warning) as warned,
    ):
        for n in (3, 5, 9, 16):
            x = torch.randn(n, 8)
            torch.testing.assert_close(compiled(x, w), f(x, w))
    assert len([w for w in warned if issubclass(w.category, dyngen.FallbackWarning)]) == 1
    s = dyngen.stats()
    assert s["backend_calls"] == 1 and s["dynamic_graphs"] == 1
    assert [fb["graph"] for fb in s["fallbacks"]] == ["graph0.inference"]
    assert "op erfinv" in s["fallbacks"][0]["reason"]
    assert "fallback: graph0.inference runs in part as ATen ops" in caplog.text
    # The whole graph was not exported; its supported regions were (Note [Partial graphs]).
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("graph0.inference-")]


def test_strict_fallback_raises_with_the_op_name(fresh, opts):
    """DYNGEN_STRICT=1: the graph dyngen cannot take is an error naming the op, not eager."""
    opts(strict=True)
    compiled = dyngen.thunderfx.compile(lambda x: torch.erfinv(x * 0.5).sin(), dynamic=True)
    with pytest.raises(Exception, match=r"op erfinv.*DYNGEN_STRICT=1") as raised:
        compiled(torch.randn(5, 3))
    assert "FallbackError" in f"{raised.type.__name__}: {raised.value}"
    assert dyngen.stats()["fallbacks"] == []


def test_record_fallback_warns_once_per_graph_and_reason(opts):
    from dyngen.counters import record_fallback

    opts(strict=False)
    with pytest.warns(dyngen.FallbackWarning) as warned:
        for _ in range(3):
            record_fallback("g_once", "reason A")
        record_fallback("g_once", "reason B")
        record_fallback("g_other", "reason A")
    assert [str(w.message) for w in warned] == [
        "dyngen: g_once runs eagerly: reason A",
        "dyngen: g_once runs eagerly: reason B",
        "dyngen: g_other runs eagerly: reason A",
    ]


def test_dump_and_noncontiguous_inputs(fresh, opts, tmp_path):
    opts(dump_dir=str(tmp_path))
    compiled = torch.compile(
        lambda x, w: torch.nn.functional.silu(x @ w.t()) * 2,
        backend=dyngen.aot.backend,
        dynamic=True,
    )
    w = torch.randn(6, 8)
    for n in (4, 7):
        x = torch.randn(8, n).t()  # non-contiguous: made contiguous at call time
        torch.testing.assert_close(compiled(x, w), torch.nn.functional.silu(x @ w.t()) * 2)
    dumps = list(tmp_path.glob("graph*.inference-*.dgir"))
    assert len(dumps) == 1 and "sym s0 in [2, inf] div 1" in dumps[0].read_text()
    fb = dumps[0].with_suffix(".fb")  # graph.fb next to the text: what `dyngen compile` loads
    assert fb.read_bytes()[4:8] == b"DGIR"
    assert _capi.core_print(fb.read_bytes())[0] == dumps[0].read_text()
    if runtime.plan_for(None)[0] == "capi":  # the ATen executor runs no passes
        passes = dumps[0].with_suffix("")  # the core's IR after each pass, for this graph only
        first = (passes / "0_input.dgir").read_text()
        assert first.split("\n", 1)[1] == dumps[0].read_text().split("\n", 1)[1]  # (unnamed)


def test_core_prints_the_frontend_text_back():
    """With libdyngen.so: the core parses what the frontend writes and prints it back unchanged."""
    try:
        _capi.load()
    except dyngen.LibraryNotFound:
        pytest.skip("libdyngen.so is not built")
    for text in (SEED_TEXT,):
        printed, key = _capi.core_print(text)
        assert printed == text and len(key) == 64


def test_capi_dry_run_does_everything_but_launch():
    """run(dry_run=True): the call path without launching (bench/python/host_overhead.py)."""
    exe = dyngen.compile_text(SEED_TEXT, "seed")
    before = _capi.get_stats()["launches"]
    for n in (2, 9):
        outs = exe.run(_seed_inputs(n), dry_run=True)
        assert [(tuple(o.shape), o.dtype) for o in outs] == [((n, 2048), torch.bfloat16)]
    assert _capi.get_stats()["launches"] == before
    ins = _seed_inputs(4)
    ins[1] = 5  # the sym input disagrees with x's rows: checked as in a real launch
    with pytest.raises(dyngen.LaunchError):
        exe.run(ins, dry_run=True)
    ins = _seed_inputs(3)
    ins[0] = ins[0].float()  # a wrong dtype
    with pytest.raises(dyngen.LaunchError):
        exe.run(ins, dry_run=True)
    assert _capi.get_stats()["launches"] == before


def test_executor_follows_the_tensors(opts):
    """Note [Executor choice]: CUDA tensors get the generated kernels for their GPU; CPU tensors
    the ATen executor unless emulation (or the driver double) is asked for."""
    opts(executor="", target="", driver_double=False)
    assert runtime.plan_for(torch.device("cuda", 1)) == ("capi", "cuda:1")
    assert runtime.plan_for(None) == ("reference", None)
    assert runtime.plan_for(torch.device("cpu")) == ("reference", None)
    opts(executor="emulate")
    assert runtime.plan_for(None) == ("capi", "host")
    assert runtime.plan_for(torch.device("cuda", 0)) == ("capi", "cuda:0")
    opts(executor="", driver_double=True)
    assert runtime.plan_for(None) == ("capi", "cuda:0")
    opts(executor="reference")
    assert runtime.plan_for(torch.device("cuda", 0)) == ("reference", None)


TWO_MATMULS = """graph @two_matmuls
sym s0 in [1, inf] div 1
input %x: f32[s0, 8]
input %w1: f32[8, 16]
input %w2: f32[16, 4]
%h: f32[s0, 16] = matmul(%x, %w1)
%a: f32[s0, 16] = silu(%h)
%y: f32[s0, 4] = matmul(%a, %w2)
output %y
"""


def test_call_path_plans_follow_every_call(opts):
    """Note [The call path]: a plan per shape set, new data pointers on every call, a workspace
    that is reused while large enough and grown when not, fresh outputs each call, and inputs
    that disagree with the plan's graph refused as in a first call."""
    opts(executor="emulate")
    exe = dyngen.compile_text(TWO_MATMULS, "two_matmuls")
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    kept = []
    for n in (3, 70, 3, 1, 70):
        x = torch.randn(n, 8)  # a new tensor (and pointer) every call
        (y,) = exe.run([x, w1, w2])
        torch.testing.assert_close(y, torch.nn.functional.silu(x @ w1) @ w2, rtol=1e-4, atol=1e-5)
        kept.append((x, y, y.clone()))
    assert len({y.data_ptr() for _, y, _ in kept}) == len(kept)  # no output reused
    for _, y, copy in kept:  # later calls (and their workspace) wrote none of them
        assert torch.equal(y, copy)
    assert len(exe._state().plans) == 3  # n = 3, 70 and 1
    assert exe._state().workspace.numel() >= 70 * 16 * 4
    with pytest.raises(dyngen.LaunchError, match="input 0"):
        exe.run([torch.randn(5, 8, dtype=torch.float64), w1, w2])
    with pytest.raises(dyngen.LaunchError):
        exe.run([torch.randn(5, 9), w1, w2])
    with pytest.raises(dyngen.LaunchError):
        exe.run([torch.randn(5, 8), w1])


def test_graph_without_tensor_outputs_needs_no_executable(fresh, opts):
    """A backward whose gradient is the incoming one (no IR op computes it) is a graph without
    tensor outputs: nothing is compiled for it and nothing falls back (strict mode would raise;
    the core refuses to build a graph without outputs)."""
    opts(strict=True, executor="emulate")
    compiled = torch.compile(lambda x: x.clone(), backend=dyngen.aot.backend, dynamic=True)
    for n in (3, 5):
        x = torch.randn(n, 4, requires_grad=True)
        compiled(x).sum().backward()
        assert torch.equal(x.grad, torch.ones(n, 4))
    assert dyngen.stats()["fallbacks"] == []


def test_unaligned_operand_is_counted_and_exact():
    """Note [Unaligned operands]: x as a view one element into its storage (2 bytes past a 16-byte
    boundary) runs the GEMMs' fallback kernels and the rank-r partials' element-load loop, which
    give the aligned run's results and are counted in dyngen.stats()["unaligned_launches"];
    aligned tensors count nothing. At 3 tokens the aligned run takes the small-M tile, whose warps
    share K (Note [Sliced K]): its f32 sums run in another order than the fallback's, so a bf16
    output may differ in its last bit; the same call gives the same bits every time."""
    exe = dyngen.compile_text(SEED_TEXT, "seed")
    ins = _seed_inputs(3)
    before = dyngen.stats()["unaligned_launches"]
    (aligned,) = exe.run(ins)
    assert dyngen.stats()["unaligned_launches"] == before
    x = ins[0]
    storage = torch.empty(x.numel() + 1, dtype=x.dtype)
    shifted = storage[1:].view(x.shape)
    shifted.copy_(x)
    assert shifted.data_ptr() % 16 == (x.data_ptr() + 2) % 16 == 2
    (out,) = exe.run([shifted] + ins[1:])
    scale = max(1.0, aligned.float().abs().max().item())
    torch.testing.assert_close(out.float(), aligned.float(), rtol=2**-7, atol=scale * 2**-7)
    (again,) = exe.run([shifted] + ins[1:])
    assert torch.equal(again, out)
    assert dyngen.stats()["unaligned_launches"] > before


LINEAR_128 = """graph @linear_128
sym s0 in [1, inf] div 1
input %x: bf16[s0, 128]
input %w: bf16[128, 128]
%y: bf16[s0, 128] = linear(%x, %w)
output %y
"""


def test_disabled_passes_reach_the_core(opts, tmp_path):
    """DYNGEN_DISABLE_PASSES (options().disabled_passes) is what `--disable-pass` is for every
    graph the process compiles: "wgmma" builds sm_90a's GEMM on mma.sync, for a GPU A/B run. The
    generated source is read, so nothing here needs a GPU; a misspelt name fails the compile."""
    from dyngen.executors.native import CapiGraphRunner

    def source(name):
        CapiGraphRunner(LINEAR_128, target="sm_90a", emit_dir=str(tmp_path / name))
        return (tmp_path / name / "kernels.cu").read_text()

    opts(disabled_passes=())
    assert "dg_wgmma_mainloop" in source("default")
    opts(disabled_passes=("wgmma",))
    mma_sync = source("no_wgmma")
    assert "dg_wgmma_mainloop" not in mma_sync and "dg_gemm_mainloop<" in mma_sync
    opts(disabled_passes=("wgmm",))
    with pytest.raises(Exception, match="'wgmm': no such pass"):
        source("typo")
