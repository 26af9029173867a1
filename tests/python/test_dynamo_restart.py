"""Note [Dynamo restarts]: under dynamic=True a Python float argument becomes a SymFloat, and
AOTAutograd's tensorify pass asks Dynamo to trace the frame again (TensorifyScalarRestartAnalysis;
here SDPA's `scale=`). dyngen.thunderfx passes that on to Dynamo instead of recording it as an eager
fallback of the whole graph, and the retraced graph goes to dyngen."""

import math

import torch

import dyngen
import dyngen.thunderfx
from dyngen.options import options, set_options


def attention(x, scale: float):
    out = torch.nn.functional.scaled_dot_product_attention(x, x, x, scale=scale)
    return out.sum(0) * math.sqrt(scale)


def test_restart_reaches_dynamo_and_the_graph_compiles(fresh):
    # SDPA's softmax (aten._safe_softmax) has no FX -> IR handler yet: that op runs as ATen, a
    # recorded partial graph, which strict mode would raise on; the restart is what is checked here.
    strict = options().strict
    set_options(strict=False)
    try:
        compiled = dyngen.thunderfx.compile(attention, dynamic=True)
        for n, scale in ((5, 0.5), (7, 0.25)):
            x = torch.randn(2, n, 8, requires_grad=True)
            torch.testing.assert_close(compiled(x, scale), attention(x, scale))
    finally:
        set_options(strict=strict)
    kinds = [g["kind"] for g in compiled.backend.graphs]
    assert kinds[0] == "retraced" and set(kinds[1:]) == {"dyngen"}, compiled.backend.graphs
    reasons = [f["reason"] for f in dyngen.stats()["fallbacks"]]
    assert reasons and all("_safe_softmax" in r for r in reasons), reasons
