"""Reproduce the seed: the PEFT-LoRA OLMoE expert MLP under stock ThunderFX, many token counts.

Prints the Dynamo graphs ThunderFX receives, the AOTAutograd forward/backward ATen graphs of the
dynamic one (what dyngen compiles), and Thunder's cache misses per call.

    TORCH_LOGS=graph_breaks,recompiles python frontends/python/tools/show_graphs.py \
        --hidden 256 --ffn 128 --tokens 5,9,12,17
Defaults are small; --hidden 2048 --ffn 1024 is the real OLMoE expert.
"""

from __future__ import annotations

import argparse
import os
import warnings

os.environ.setdefault("TORCH_LOGS", "graph_breaks,recompiles")
warnings.filterwarnings("ignore")

import torch  # noqa: E402
from torch import nn  # noqa: E402


def build_expert(hidden: int, ffn: int, rank: int, alpha: int) -> nn.Module:
    """transformers' OlmoeMLP (bf16) with PEFT LoRA on gate/up/down (fp32 adapters)."""
    from peft import LoraConfig, get_peft_model
    from transformers.models.olmoe.configuration_olmoe import OlmoeConfig
    from transformers.models.olmoe.modeling_olmoe import OlmoeMLP

    cfg = OlmoeConfig(hidden_size=hidden, intermediate_size=ffn, hidden_act="silu")
    mlp = OlmoeMLP(cfg).to(torch.bfloat16)
    lcfg = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=0.0,
        target_modules=["gate_proj", "up_proj", "down_proj"],
    )
    model = get_peft_model(mlp, lcfg)  # autocast_adapter_dtype=True: adapters in fp32
    for name, p in model.named_parameters():
        if "lora_B" in name:  # PEFT initialises B to zero; make the adapter do something
            nn.init.normal_(p, std=0.02)
    return model


class Routed(nn.Module):
    """MoE-like routing: the tokens picked by a data-dependent mask go through the expert."""

    def __init__(self, expert: nn.Module):
        super().__init__()
        self.expert = expert

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        (rows,) = torch.where(mask)  # nonzero: Dynamo breaks the graph here
        y = self.expert(x[rows])
        return torch.zeros_like(x).index_add(0, rows, y)


def routed_inputs(total: int, picked: int, hidden: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(total, hidden, generator=g).to(torch.bfloat16).requires_grad_(True)
    mask = torch.zeros(total, dtype=torch.bool)
    mask[torch.randperm(total, generator=g)[:picked]] = True
    return x, mask


def print_aten_graphs(gm: torch.fx.GraphModule, example_inputs) -> None:
    from torch._functorch.aot_autograd import aot_module_simplified

    def show(kind):
        def compiler(g, _inputs):
            print(f"\n===== AOTAutograd {kind} ATen graph =====")
            print(g.print_readable(False))
            return g

        return compiler

    aot_module_simplified(
        gm, example_inputs, fw_compiler=show("forward"), bw_compiler=show("backward")
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=int, default=32)
    ap.add_argument("--total", type=int, default=64, help="tokens before routing")
    ap.add_argument("--tokens", default="5,9,12,17,23,30", help="routed token counts, one per call")
    ap.add_argument("--no-aten", action="store_true", help="skip the AOTAutograd graphs")
    args = ap.parse_args()

    import thunder
    from thunder.dynamo import ThunderCompiler

    torch.manual_seed(0)
    model = Routed(build_expert(args.hidden, args.ffn, args.rank, args.alpha))
    thunder_backend = ThunderCompiler()
    seen_dynamic = []

    def backend(gm, example_inputs):
        dynamic = any(
            isinstance(a, torch.SymInt)
            or (isinstance(a, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in a.shape))
            for a in example_inputs
        )
        n = len(thunder_backend.subgraph_infos)
        print(f"\n===== Dynamo graph #{n} (dynamic={dynamic}) =====")
        print(gm.print_readable(False))
        if dynamic and not args.no_aten and not seen_dynamic:
            seen_dynamic.append(gm)
            import copy

            print_aten_graphs(copy.deepcopy(gm), example_inputs)
        return thunder_backend(gm, example_inputs)

    compiled = torch.compile(model, backend=backend)

    def misses() -> int:
        n = 0
        for info in thunder_backend.subgraph_infos:
            for fn in info.thunder_compiled_fns or []:
                n += thunder.cache_misses(fn)
        return n

    for step, picked in enumerate(int(t) for t in args.tokens.split(",")):
        x, mask = routed_inputs(args.total, picked, args.hidden, seed=step)
        out = compiled(x, mask)
        out.float().sum().backward()
        print(
            f"call {step}: tokens={picked} dynamo_graphs={len(thunder_backend.subgraph_infos)} "
            f"thunder_cache_misses={misses()}"
        )


if __name__ == "__main__":
    main()
