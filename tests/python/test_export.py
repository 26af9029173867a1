"""Export: the seed's Dynamo subgraph as IR text, Unsupported for unknown ops, and fidelity (the
exported IR run by the executor equals the FX graph run eagerly, for many token counts)."""

import os
from pathlib import Path

import pytest
import torch
from helpers import assert_close_bf16, build_expert, moe_tail

import dyngen
from dyngen.thunderfx import is_dynamic

GOLDEN = Path(__file__).parent / "golden"


def capture(fn, calls, **compile_kw):
    """The Dynamo graphs of `fn` over `calls` (argument tuples), each with its example inputs."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    c = torch.compile(fn, backend=backend, **compile_kw)
    for args in calls:
        c(*args)
    return graphs


def test_seed_subgraph_exports_to_golden_text(fresh):
    """The seed's module at its real size (OLMoE expert 2048/1024, LoRA r=16, alpha=32): the
    second token count makes Dynamo's graph symbolic; its IR is the golden text."""
    torch.manual_seed(0)
    expert = build_expert(2048, 1024, 16, 32)
    graphs = capture(expert, [(torch.randn(n, 2048).bfloat16(),) for n in (5, 9)])
    assert [is_dynamic(ex) for _, ex in graphs] == [False, True]
    gm, ex = graphs[1]
    exported = dyngen.export(gm, ex, name="expert_mlp")
    text = exported.text
    golden = GOLDEN / "seed_expert_mlp.ir"
    if os.environ.get("DYNGEN_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()
    # The structure the issue shows: 9 linears, LoRA scale 2.0 as constants, casts, one silu.
    assert "sym s0 in [2, inf] div 1" in text
    assert text.count("= linear(") == 9 and text.count("value = 2.0") == 3
    assert text.count("{dtype = f32}") == 3 and text.count("{dtype = bf16}") == 3
    assert text.count("= silu(") == 1 and "bf16[s0, 2048] = cast(" in text


def test_unknown_op_raises_unsupported(fresh):
    graphs = capture(lambda x: torch.erfinv(x) * 2, [(torch.randn(6, 4),)], dynamic=True)
    with pytest.raises(dyngen.Unsupported, match=r"op erfinv \(torch\.erfinv\)"):
        dyngen.export(*graphs[0])


def _shadow(checked):
    """A backend running both the FX graph and dyngen's executable on every call."""

    def backend(gm, example_inputs):
        if not is_dynamic(example_inputs):
            return gm.forward
        cg = dyngen.compile_fx_graph(gm, example_inputs, f"shadow{len(checked)}")

        def run(*args):
            want = gm(*args)
            got = cg(*args)
            for g, w in zip(got, want):
                assert_close_bf16(g, w, "shadow")
            checked.append(args)
            return want

        return run

    return backend


def test_fidelity_seed_and_moe_indexing(fresh):
    """Forward graphs with symbolic dims: the LoRA expert, and the MoE block's gather/scatter
    (x[None, top_x], routing_weights[top_x, idx, None], index_add_)."""
    torch.manual_seed(0)
    expert = build_expert(64, 32, 4, 8)

    checked = []  # automatic dynamic: the first call is static, then n is symbolic
    c = torch.compile(moe_tail(expert), backend=_shadow(checked))
    x = torch.randn(20, 64).bfloat16()
    w = torch.rand(20, 2).bfloat16()
    for n in (3, 7, 11, 20):
        top_x = torch.randperm(20)[:n]
        idx = torch.randint(0, 2, (n,))
        c(x, w, top_x, idx)
    assert len(checked) == 3
    assert dyngen.stats()["exported_graphs"] == 1
