"""graph.fb from Python (the core's writer, through the builder of Note [One IR]): the core loads
the bytes the frontend hands it and sees the same graph as from the text form (same canonical
hash, same print); malformed bytes are a clear InvalidGraph error, never a crash."""

import ctypes
import random
import re

import pytest
import torch
import torch.nn.functional as F
from conftest import REPO
from helpers import Routed, build_expert, moe_tail, routed_inputs

import dyngen
import dyngen.aot
from dyngen.core import capi as _capi
from dyngen.core.builder_api import lib as builder_lib
from dyngen.core.ir import NEG_INF, GraphBuilder, SymList, floordiv, mod, sym_max, sym_min
from dyngen.core.ops import DType
from dyngen.executors.native import CapiGraphRunner
from dyngen.options import options, set_options

SEED_TEXT = (REPO / "tests" / "python" / "golden" / "seed_expert_mlp.ir").read_text()


def _library():
    try:
        return _capi.load()
    except dyngen.LibraryNotFound:
        pytest.skip("libdyngen.so is not built")


def expr_graph():
    """Exercises every expression kind, bounded and unbounded facts, divisors, two symbols, a
    symbolic-integer input holding a compound expression, and a -0.0 float attribute."""
    b = GraphBuilder("exprs-1.test")
    s0 = b.symbol("s0")  # [2, inf] div 1
    s1 = b.symbol("tok", lo=8, hi=4096, divisor=8)  # bounded, divisible by 8
    s2 = b.symbol("d", lo=NEG_INF, hi=100)  # no lower bound (never a dim)
    x = b.input(DType.BF16, [s0, s1])
    b.sym_input(s0 * s1 - 3 * s2 + 7)
    y = b.input(DType.F32, [sym_max(s0, s1), 16])
    r = b.op("reshape", [x], {"shape": SymList([s0 * s1])})
    sl = b.op("slice", [r], {"dim": 0, "start": SymList([1]), "end": SymList([s0 * s1]), "step": 3})
    f = b.op(
        "full",
        [],
        {
            "dtype": DType.F32,
            "value": -0.0,
            "shape": SymList([mod(s0, 5) + 1, sym_min(s0, s1), floordiv(s1, 3)]),
        },
    )
    c = b.op("constant", [], {"dtype": DType.F32, "value": 0.0})
    z = b.op("mul", [y, c])
    cat = b.op("cat", [sl, sl], {"dim": 0})
    for v in (sl, f, z, cat):
        b.output(v)
    return b.finish()


def test_core_loads_python_fb_like_the_text():
    _library()
    g = expr_graph()
    printed, key = _capi.core_print(g.fb)
    text_printed, text_key = _capi.core_print(g.text)
    assert key == text_key
    assert printed == g.text == text_printed
    # The golden seed text: loaded as text, written as graph.fb by the core, loaded back.
    lib = builder_lib()
    seed = _capi.load_graph(SEED_TEXT)
    try:
        p, n = ctypes.c_void_p(), ctypes.c_size_t()
        assert lib.dg_graph_write_fb(seed, ctypes.byref(p), ctypes.byref(n)) == 0
        fb = ctypes.string_at(p, n.value)
        lib.dg_free(p)
    finally:
        lib.dg_graph_free(seed)
    assert _capi.core_print(fb) == _capi.core_print(SEED_TEXT)


# ---- exported graphs: DYNGEN_DUMP writes graph.fb and the text; the core agrees on both ------


@pytest.fixture
def dump_dir(tmp_path):
    saved = options()
    set_options(dump_dir=str(tmp_path))
    yield tmp_path
    set_options(**saved.__dict__)


def mixer(x, w, b, g):
    """Broad op coverage: addmm, softmax (decomposed), where, tanh, sigmoid, mean, rsqrt, cat,
    slices, exp/log, bmm, amax."""
    h = F.linear(x, w, b)
    a = torch.softmax(h.float(), dim=-1).to(x.dtype)
    y = torch.where(h > 0, F.silu(h), torch.tanh(h) * 0.5) + torch.sigmoid(a) * g
    y = y - y.mean(dim=-1, keepdim=True)
    y = y * torch.rsqrt(y.square().mean(-1, keepdim=True) + 1e-5)
    z = torch.cat([y[:, :3], y[:, 3:].exp().log()], dim=1)
    att = (z.unsqueeze(0) @ z.unsqueeze(0).transpose(1, 2)).squeeze(0)
    return z.relu() + att.amax(-1, keepdim=True) / 4


def test_a_graph_compiled_from_its_handle_is_the_graph_fb_compiles():
    """The frontend compiles a built graph from its dg_graph handle, without graph.fb. The same
    graph written as graph.fb and loaded (what `dyngen compile` does with a DYNGEN_DUMP file) has
    the same executable key, so a cache prebuilt from dumped files serves the process."""
    _library()
    b = GraphBuilder("handle.test")
    s0 = b.symbol("s0", lo=2, hi=4096)
    x = b.input(DType.F32, [s0, 8])
    third = b.op("constant", [], {"dtype": DType.F32, "value": 1 / 3})
    b.output(b.op("mul", [b.op("exp", [x]), third]))
    b.output(b.op("reshape", [x], {"shape": SymList([s0 * 8])}))
    g = b.finish()
    from_handle = CapiGraphRunner(g, target="sm_90a")
    from_fb = CapiGraphRunner(g.fb, target="sm_90a")
    assert from_fb.key == from_handle.key
    assert from_fb.cache_hit == "memory"


def test_exported_graphs_fb_equals_text(fresh, dump_dir, monkeypatch):
    """The seed (routed LoRA expert, forward and backward), the MoE gather/scatter (forward and
    backward) and a broad op mix: for each exported graph the dumped graph.fb loads in the core
    with the text form's hash, and the core prints it back as the dumped text."""
    _library()
    torch.manual_seed(0)
    expert = build_expert(64, 32, 4, 8)
    seed = torch.compile(Routed(expert), backend=dyngen.aot.backend, dynamic=True)
    for step, n in enumerate((5, 9)):
        x, mask = routed_inputs(40, n, 64, seed=step)
        seed(x, mask).float().sum().backward()
    tail = torch.compile(moe_tail(expert), backend=dyngen.aot.backend, dynamic=True)
    w = torch.rand(20, 2).bfloat16().requires_grad_(True)
    for n in (3, 7):
        x = torch.randn(20, 64).bfloat16().requires_grad_(True)
        tail(x, w, torch.randperm(20)[:n], torch.randint(0, 2, (n,))).float().sum().backward()
    mix = torch.compile(mixer, backend=dyngen.aot.backend, dynamic=True)
    params = [
        torch.randn(12, 8, requires_grad=True),
        torch.randn(12, requires_grad=True),
        torch.randn(12, requires_grad=True),
    ]
    mix(torch.randn(5, 8, requires_grad=True), *params).sum().backward()

    texts = sorted(dump_dir.glob("*.dgir"))
    names = [p.name.rsplit("-", 1)[0] for p in texts]
    assert sum(n.endswith(".forward") for n in names) == 3, names
    assert sum(n.endswith(".backward") for n in names) == 3, names
    joined = "".join(p.read_text() for p in texts)
    for op in ("index_select", "index_add", "linear", "silu_backward", "cat", "amax", "where"):
        assert f"= {op}(" in joined, op
    for path in texts:
        text = path.read_text()
        fb = path.with_suffix(".fb").read_bytes()
        printed, key = _capi.core_print(fb)
        assert printed == text, path.name
        assert key == _capi.core_print(text)[1], path.name


# ---- malformed bytes: InvalidGraph with the core's message ---------------------------------


def test_malformed_bytes_are_a_clear_error():
    _library()
    good = expr_graph().fb
    cases = {
        b"": "empty file",
        b"not a graph at all": 'no "DGIR" file identifier',
        good[: len(good) // 2]: "corrupt or truncated",
        good[:4] + b"XXXX" + good[8:]: 'no "DGIR" file identifier',
    }
    for data, msg in cases.items():
        with pytest.raises(dyngen.InvalidGraph, match=re.escape(msg)):
            _capi.core_print(data)
    with pytest.raises(dyngen.InvalidGraph, match="dg_graph_load: .*truncated"):
        CapiGraphRunner(good[:-9])
    with pytest.raises(dyngen.InvalidGraph, match="dg_graph_load_text"):
        CapiGraphRunner("graph @x\noutput %7\n")
    with pytest.raises(TypeError):
        _capi.load_graph(42)


def test_mutated_bytes_never_crash():
    """Random byte flips, truncations and splices of a valid graph.fb: each one loads (and then
    prints and hashes) or is refused with InvalidGraph."""
    _library()
    good = expr_graph().fb
    rng = random.Random(1234)
    refused = 0
    for _ in range(400):
        data = bytearray(good)
        kind = rng.randrange(3)
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif kind == 1:
            data = data[: rng.randrange(len(data))]
        else:
            i, j = sorted(rng.randrange(len(data)) for _ in range(2))
            data[i:j] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 16)))
        try:
            _capi.core_print(bytes(data))
        except dyngen.InvalidGraph:
            refused += 1
    assert refused > 100
