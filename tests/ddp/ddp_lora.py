"""One rank of the data-parallel check (run by torchrun, see tests/python/test_ddp.py): the tiny
OLMoE with PEFT LoRA under DistributedDataParallel (gloo) and dyngen.thunderfx.

Rank 0 first trains a copy of the model alone for one step, which compiles dyngen's graphs into
the shared DYNGEN_CACHE_DIR; then both ranks train under DDP. Written as JSON to
$DDP_RESULT_DIR/rank<N>.json (the ranks share one stdout, where their lines can interleave):
dyngen's counters after warm-up and at the end, and whether the LoRA weights agree.
"""

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "frontends" / "python"), str(REPO / "bench" / "moe_peft")]

import models  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import dyngen  # noqa: E402
import dyngen.thunderfx  # noqa: E402

MODEL, SEQ, STEPS, WARMUP = "allenai/OLMoE-1B-7B-0924", 24, 4, 2


def counters() -> dict:
    s = dyngen.stats()
    return {
        k: s[k]
        for k in (
            "nvrtc_compiles",
            "graphs_compiled",
            "cache_hits_disk",
            "cache_hits_memory",
            "backend_calls",
            "thunder_cache_misses",
        )
    } | {"fallbacks": len(s["fallbacks"]), "executor": s["executor"]}


def train(model, steps, rank, on_step=None):
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for step in range(steps):
        # Each rank its own batch (as data parallelism does), so token counts differ by rank.
        ids = models.batch(step, 1, SEQ, built.vocab_size, seed=10 + rank, device="cpu")
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if on_step:
            on_step(step)


dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
built = models.build(MODEL, scale="tiny", num_layers=1, attn_implementation="sdpa", seed=0)

if rank == 0:  # compile dyngen's graphs into the shared disk cache, before rank 1 compiles any
    warm = models.build(MODEL, scale="tiny", num_layers=1, attn_implementation="sdpa", seed=0)
    train(dyngen.thunderfx.compile(warm.model), 1, rank)
    torch._dynamo.reset()
dyngen.reset_stats()
dist.barrier()

ddp = torch.nn.parallel.DistributedDataParallel(built.model)
compiled = dyngen.thunderfx.compile(ddp)
marks = {}
train(
    compiled,
    STEPS,
    rank,
    lambda step: marks.__setitem__(step, counters()) if step in (WARMUP - 1, STEPS - 1) else None,
)

lora = torch.cat(
    [p.detach().flatten().float() for n, p in built.model.named_parameters() if "lora_" in n]
)
gathered = [torch.empty_like(lora) for _ in range(dist.get_world_size())]
dist.all_gather(gathered, lora)
result = json.dumps(
    {
        "rank": rank,
        "after_warmup": marks[WARMUP - 1],
        "end": marks[STEPS - 1],
        "lora_numel": lora.numel(),
        "adapters_identical": all(torch.equal(gathered[0], g) for g in gathered),
    }
)
(Path(os.environ["DDP_RESULT_DIR"]) / f"rank{rank}.json").write_text(result)
print("RESULT " + result, flush=True)
dist.destroy_process_group()
