"""The seed's module loop in a process of its own (tests start it with subprocess):

    .venv/bin/python tests/python/seed_loop.py --backend dyngen --tokens 5,9,12 [--check]
        [--hidden 64 --ffn 32 --rank 4]

--backend dyngen: dyngen.thunderfx.compile; stock: thunder.dynamo.thunderfx. Each token count is
one forward + backward of the routed PEFT-LoRA expert (tests/python/helpers.py); --check compares
outputs and gradients with eager. Prints one JSON line: dyngen.stats() (dyngen), the Thunder
cache misses (both) and the loop's seconds.
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [
    str(HERE),
    str(HERE.parents[1] / "frontends" / "python"),
    str(HERE.parents[1] / "frontends" / "python" / "tools"),
]
warnings.filterwarnings("ignore")

import torch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["dyngen", "stock"], default="dyngen")
    ap.add_argument("--tokens", default="5,9,12")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--ffn", type=int, default=32)
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--check", action="store_true", help="compare with eager")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    import thunder
    from helpers import check_lora_grads, make, train_loop

    import dyngen
    import dyngen.thunderfx

    model, eager = make(args.hidden, args.ffn, args.rank)
    tokens = [int(t) for t in args.tokens.split(",")]
    t0 = time.perf_counter()
    if args.backend == "dyngen":
        compiled = dyngen.thunderfx.compile(model)
    else:
        from thunder.dynamo import thunderfx

        compiled = thunderfx(model)
    train_loop(compiled, eager if args.check else None, tokens, args.hidden)
    if args.check:
        check_lora_grads(model, eager)
    seconds = time.perf_counter() - t0
    if args.backend == "dyngen":
        s = dyngen.stats()
        misses = s["thunder_cache_misses"]
    else:
        s = {}
        misses = sum(
            thunder.cache_misses(fn)
            for info in compiled._backend.subgraph_infos
            for fn in info.thunder_compiled_fns
        )
    print(json.dumps({"stats": s, "thunder_cache_misses": misses, "seconds": seconds}))


if __name__ == "__main__":
    main()
