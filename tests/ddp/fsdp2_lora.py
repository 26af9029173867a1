"""One rank of the multi-device checks (run by torchrun, see tests/python/test_fsdp2.py and
test_ddp.py): a tiny MoE with PEFT LoRA sharded as lightning-thunder's benchmark_peft.py
`setup_fsdp2` shards it (fully_shard on every nn.Linear and nn.Embedding, then on the root; bf16
MixedPrecisionPolicy; reshard_after_forward=True), or wrapped in DistributedDataParallel, trained
side by side eagerly and compiled, each rank a different sequence length every step.

Environment: FSDP_BACKEND = eager | aot_eager | dyngen | dyngen_dynamic | thunderfx (stock);
FSDP_MODEL (a bench/moe_peft/moe_configs.json name, default OLMoE); FSDP_STEPS (8);
FSDP_PARALLEL = fsdp2 (default) | ddp; FSDP_MOE = grouped | loop (dyngen's MoE route);
FSDP_RESULT_DIR (where rank<N>.json goes); FSDP_CHECK_GRAPHS=1 also checks every Dynamo graph
against eager on its calls (dyngen.graph_check, Note [Checking graphs against eager]).

Written as JSON to $FSDP_RESULT_DIR/rank<N>.json (ranks share one stdout): losses per step for
eager FSDP2 and the compiled model, the LoRA gradients' relative difference after the first
backward (per tensor and global), dyngen's counters after warm-up and at the end, and where each
Dynamo graph went.
"""

import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "frontends" / "python"), str(REPO / "bench" / "moe_peft")]

import models  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: E402

import dyngen  # noqa: E402

BACKEND = os.environ.get("FSDP_BACKEND", "dyngen")
MODEL = os.environ.get("FSDP_MODEL", "allenai/OLMoE-1B-7B-0924")
STEPS = int(os.environ.get("FSDP_STEPS", "8"))
# Steps before "no compile": the static first call, the symbolic recompile, one more for late
# graphs (FSDP_WARMUP). DDP of DBRX needs 5: Dynamo itself compiles frames until the fifth step
# whatever the backend (aot_eager's compiles after each step: 44, 56, 60, 68, 71, 71, 71, 71),
# as transformers' deprecation wrapper, one code object shared by every module class, is
# recompiled per class and per shape.
WARMUP = int(os.environ.get("FSDP_WARMUP", "3"))
# Sequence lengths per step, per rank (data parallelism: each rank its own batch).
LENGTHS = {0: [24, 32, 40, 28, 36, 22, 44, 30], 1: [36, 20, 30, 44, 26, 40, 24, 34]}


RESHARD = os.environ.get("FSDP_RESHARD", "1") == "1"  # debugging: 0 keeps parameters unsharded
PARALLEL = os.environ.get("FSDP_PARALLEL", "fsdp2")
# dyngen's MoE route (dyngen.thunderfx.compile's moe=, its default when unset)
MOE = {"moe": os.environ["FSDP_MOE"]} if os.environ.get("FSDP_MOE") else {}


def setup_fsdp2(model, mesh):
    """lightning-thunder benchmark_peft.py's setup_fsdp2, with the mesh on CPU (gloo)."""
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    for _, module in model.named_modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
            fully_shard(module, mesh=mesh, reshard_after_forward=RESHARD, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=RESHARD, mp_policy=policy)
    return model


def compile_model(model):
    torch._dynamo.config.cache_size_limit = 64  # upstream's setup_compilation
    torch._dynamo.config.inline_inbuilt_nn_modules = True
    if BACKEND in ("eager", "aot_eager"):
        from dyngen import graph_check

        b = torch._dynamo.lookup_backend(BACKEND)
        return torch.compile(model, backend=graph_check.wrap_backend(b)), None
    if BACKEND == "thunderfx":
        from thunder.dynamo import thunderfx

        c = thunderfx(model)
        return c, c._backend
    import dyngen.thunderfx

    c = dyngen.thunderfx.compile(
        model, **MOE, **({"dynamic": True} if BACKEND == "dyngen_dynamic" else {})
    )
    return c, c.backend


def counters() -> dict:
    s = dyngen.stats()
    return {
        k: s[k]
        for k in ("nvrtc_compiles", "graphs_compiled", "backend_calls", "thunder_cache_misses")
    } | {
        "fallbacks": len(s["fallbacks"]),
        "fallback_reasons": s["fallbacks"][:5],
        "dynamo_compiles": compiles[0],
    }


def lora_grads(model) -> dict:
    return {
        n: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).float()
        for n, p in model.named_parameters()
        if "lora_" in n and p.grad is not None
    }


def rel(a, b) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.set_num_threads(1)
mesh = init_device_mesh("cpu", (world,))
compiles = [0]
# Every Dynamo compile, whatever the backend: "0 compiles after warm-up" is counted here.
torch._dynamo.callback.on_compile_start(lambda *a, **k: compiles.__setitem__(0, compiles[0] + 1))


def build():
    model = models.build(MODEL, scale="tiny", num_layers=1, seed=0).model
    if PARALLEL == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model)
    return setup_fsdp2(model, mesh)


# Note [Routing flips]
# A router picks each token's top-k experts; two backends whose bf16 kernels round apart by an ulp
# (Thunder's and eager's silu backward or SDPA) can pick a different k-th expert for a token near a
# tie. That expert's LoRA gradient then gains or loses a whole token: tens of percent for an expert
# with three tokens, though nothing is wrong. Exact ties are common too: a bf16 router gives several
# experts the same logit, and which of them takes the last of the k places is each top-k's own
# choice (dyngen's keeps the lower index, Note [Top-k ties]; PyTorch's CPU top-k leaves them as its
# partial sort does), so the same logits can route a token apart. The first step records every
# router's choice in both models, and the experts tied for the k-th place; the per-tensor gradient
# check leaves out the experts of tokens routed apart or tied at the k-th place (on any rank), and
# the router itself when any of its tokens is (its gradient goes to the logits of the experts
# chosen), and reports how many experts there were.
CONFIG = models.make_config(MODEL, "tiny", 1)
TOP_K = models.expert_shape(CONFIG)[3]
ROUTERS = ("mlp.gate", "router.layer")


def record_routes(model, into: list):
    def hook_for(name: str):
        @torch._dynamo.disable
        def hook(module, args, out):
            x = out.detach().float().reshape(-1, out.shape[-1])
            top = x.topk(TOP_K + 1, dim=-1).values
            kth = top[:, TOP_K - 1 : TOP_K]
            tied = (x == kth) & (top[:, TOP_K : TOP_K + 1] == kth)  # tied across the k-th place
            into.append((name, x.topk(TOP_K, dim=-1).indices.sort(dim=-1).values, tied))

        return hook

    return [
        # The router's name from its layer on ("layers.0.mlp.gate.", "blocks.0.ffn.router.layer."),
        # the same in every wrapper.
        m.register_forward_hook(hook_for(n[re.search(r"(layers|blocks)\.", n).start() :] + "."))
        for n, m in model.named_modules()
        if n.endswith(ROUTERS) and hasattr(m, "base_layer")
    ]


def experts_routed_apart(a: list, b: list) -> list[str]:
    """ "layers.L.mlp.experts.E." of every expert some token chose in one model and not the
    other, or tied for some token's k-th place in either, and the name of every router with such
    a token (all ranks)."""
    apart = set()
    for layer, ((router, x, tied_x), (_, y, tied_y)) in enumerate(zip(a, b)):
        experts = {e for rx, ry in zip(x.tolist(), y.tolist()) for e in set(rx) ^ set(ry)}
        experts |= set((tied_x | tied_y).any(0).nonzero().flatten().tolist())
        apart |= {f"layers.{layer}.mlp.experts.{e}." for e in experts}
        if experts:
            apart.add(router)
    everyone = [None] * world
    dist.all_gather_object(everyone, sorted(apart))
    return sorted(set().union(*everyone))


ref, test = build(), build()
vocab = CONFIG.vocab_size
routes = {"eager": [], "compiled": []}
hooks = record_routes(ref, routes["eager"]) + record_routes(test, routes["compiled"])
if os.environ.get("FSDP_CHECK_GRAPHS", "0") not in ("", "0"):
    from dyngen import graph_check

    graph_check.enable()
compiled, backend = compile_model(test)
opts = [
    torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=1e-2) for m in (ref, test)
]
result = {
    "rank": rank,
    "backend": BACKEND,
    "model": MODEL,
    "parallel": PARALLEL,
    "lengths": LENGTHS[rank][:STEPS],
    "loss_eager": [],
    "loss": [],
    "marks": {},
}
for step in range(STEPS):
    ids = models.batch(step, 1, LENGTHS[rank][step], vocab, seed=10 + rank, device="cpu")
    rng = torch.random.get_rng_state()
    for m, opt, key in ((ref, opts[0], "loss_eager"), (compiled, opts[1], "loss")):
        # Note [Same random numbers]
        # DBRX's router multiplies its input by uniform jitter noise in training: both models must
        # draw the same numbers, so each forward starts from the same generator state (dyngen lets
        # PyTorch make the draws in the graph's order, Note [Random numbers]).
        # Note [Same random numbers].
        torch.random.set_rng_state(rng)
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        result[key].append(float(loss.detach()))
        if step == 0:
            result.setdefault("_grads", []).append(lora_grads(ref if key == "loss_eager" else test))
        opt.step()
        opt.zero_grad(set_to_none=True)
    if step == 0:
        for h in hooks:
            h.remove()
    result.setdefault("dynamo_compiles_per_step", []).append(compiles[0])
    if step in (WARMUP - 1, STEPS - 1):
        result["marks"]["after_warmup" if step == WARMUP - 1 else "end"] = counters()

want, got = result.pop("_grads")
per = {n: rel(got[n], want[n]) for n in want}
apart = experts_routed_apart(routes["eager"], routes["compiled"])
result["experts_routed_apart"] = apart
result["lora_grad_rel_same_routing"] = {
    n: d for n, d in per.items() if not any(e in n for e in apart)
}
result["lora_grad_rel"] = per
result["lora_grad_rel_global"] = rel(
    torch.cat([got[n].flatten() for n in want]), torch.cat([want[n].flatten() for n in want])
)
result["lora_grad_rel_max"] = max(per.values())
result["lora_tensors"] = len(per)
if backend is not None and hasattr(backend, "graphs"):
    result["graphs"] = [{k: g[k] for k in ("graph", "kind", "reason")} for g in backend.graphs]
from dyngen import graph_check  # noqa: E402

result["graph_check"] = graph_check.report()
(Path(os.environ.get("FSDP_RESULT_DIR", ".")) / f"rank{rank}.json").write_text(
    json.dumps(result, indent=1)
)
print(
    f"RESULT rank {rank} {BACKEND}: loss {result['loss']} eager {result['loss_eager']} "
    f"grad rel {result['lora_grad_rel_global']:.3g} (max {result['lora_grad_rel_max']:.3g})",
    flush=True,
)
dist.destroy_process_group()
