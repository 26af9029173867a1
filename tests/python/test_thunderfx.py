"""The seed's problem and its fix: the PEFT-LoRA OLMoE expert behind MoE-like routing, called with
many token counts, under stock ThunderFX (one Thunder compile per token count) and under
dyngen.thunderfx (one Thunder compile for Dynamo's first, static call; one dyngen compile of the
symbolic graph, forward and backward, for every later token count)."""
import copy

import torch

import dyngen
import dyngen.thunderfx
from helpers import Routed, assert_close_bf16, build_expert, grads_of, routed_inputs

TOKENS = [5, 9, 12, 17, 23, 30, 31, 40, 47, 64]  # ten distinct routed token counts
TOTAL = 80                                        # tokens before routing


def make(hidden, ffn, rank, seed=0):
    torch.manual_seed(seed)
    model = Routed(build_expert(hidden, ffn, rank, 2 * rank))
    return model, copy.deepcopy(model)


def train_loop(compiled, eager, tokens, hidden):
    """Forward + backward per token count; outputs and input gradients checked against eager."""
    for step, n in enumerate(tokens):
        x, mask = routed_inputs(TOTAL, n, hidden, seed=step)
        x_ref = x.detach().clone().requires_grad_(True)
        out = compiled(x, mask)
        out.float().square().sum().backward()
        want = eager(x_ref, mask)
        want.float().square().sum().backward()
        assert_close_bf16(out, want, f"output, {n} tokens")
        assert_close_bf16(x.grad, x_ref.grad, f"input grad, {n} tokens")


def check_lora_grads(model, eager):
    got, want = grads_of(model), grads_of(eager)
    lora = [k for k in want if "lora_" in k]
    assert len(lora) == 6 and set(got) == set(want)  # A and B of gate, up, down
    for k in lora:
        assert_close_bf16(got[k], want[k], k)


def test_dyngen_compiles_the_symbolic_graph_once(fresh):
    model, eager = make(64, 32, 4)
    transforms = []  # Note [Thunder transforms list]: the caller's list must stay untouched
    compiled = dyngen.thunderfx.compile(model, transforms=transforms)
    train_loop(compiled, eager, TOKENS, 64)
    check_lora_grads(model, eager)
    s = dyngen.stats()
    assert s["fallbacks"] == []
    assert s["backend_calls"] == 2         # Dynamo: the first call static, then one symbolic graph
    assert s["static_graphs"] == 1 and s["thunder_cache_misses"] == 1
    assert s["dynamic_graphs"] == 1
    assert s["exported_graphs"] == 2 and s["graphs_compiled"] == 2  # its forward and backward
    assert s["executor"] in ("capi", "reference")
    assert transforms == []
    assert [g["kind"] for g in compiled.backend.graphs] == ["thunder", "dyngen"]


def test_stock_thunderfx_recompiles_per_token_count(fresh):
    import thunder
    from thunder.dynamo import thunderfx

    model, eager = make(64, 32, 4)
    compiled = thunderfx(model)
    train_loop(compiled, eager, TOKENS, 64)
    misses = sum(thunder.cache_misses(fn) for info in compiled._backend.subgraph_infos
                 for fn in info.thunder_compiled_fns)
    assert misses == len(TOKENS)  # the seed's problem: one Thunder compile per token count


def test_dynamic_true_is_symbolic_from_the_first_call(fresh):
    """torch.compile(dynamic=True): no static first graph, so Thunder compiles nothing. (Dynamo
    then also passes PEFT's float scaling as a 0-d tensor read with .item().)"""
    model, eager = make(64, 32, 4)
    compiled = dyngen.thunderfx.compile(model, dynamic=True)
    train_loop(compiled, eager, TOKENS[:3], 64)
    check_lora_grads(model, eager)
    s = dyngen.stats()
    assert (s["static_graphs"], s["dynamic_graphs"], s["thunder_cache_misses"]) == (0, 1, 0)
    assert s["graphs_compiled"] == 2 and s["fallbacks"] == []


def test_real_olmoe_expert_size(fresh):
    """hidden 2048, ffn 1024, LoRA r=16 alpha=32: the seed's exact subgraph."""
    model, eager = make(2048, 1024, 16)
    compiled = dyngen.thunderfx.compile(model)
    train_loop(compiled, eager, [6, 19, 33], 2048)
    check_lora_grads(model, eager)
    s = dyngen.stats()
    assert (s["static_graphs"], s["dynamic_graphs"], s["graphs_compiled"]) == (1, 1, 2)
    assert s["thunder_cache_misses"] == 1 and s["fallbacks"] == []
