"""A debugging mode: every Dynamo graph's compiled function checked against the graph run eagerly.

Note [Checking graphs against eager]
When training goes wrong under a compiled model and nothing fell back, the question is which of
the dozens of Dynamo graphs computes something else than PyTorch. With DYNGEN_CHECK_GRAPHS=N (or
`graph_check.enable(N)`, N=2 by default), each graph the ThunderFX backend returns is wrapped: on
its first N calls it also runs, on copies of the inputs, the compiled function and the Dynamo graph
itself (eager PyTorch), compares the forward outputs, then back-propagates the same random
cotangents through both and compares the gradients of every input that requires grad. The real call
then runs as usual, so training is unchanged. `report()` lists every graph checked with its largest
relative differences (forward and gradient) and `bad` for those over the tolerance of their dtype;
each bad graph is also logged as a warning. `wrap_backend(backend)` does the same for any
torch.compile backend (eager, aot_eager), for comparison.

Copies are plain tensors, so the check answers "is this function right", not "is it right with
the caller's tensors": a function that went wrong only because FSDP2 frees and refills its
unsharded parameters' storage between forward and backward would pass here. None did when
FSDP2 was first tested (Thunder's graphs gave the same gradients with reshard_after_forward=False);
what the check found there was dyngen's view outputs (Note [Outputs that are views]) and Thunder's
bf16 rounding, an ulp apart from eager's in silu's backward and SDPA (0.3-0.6%, under the bf16
tolerance).
"""

from __future__ import annotations

import os

import torch
from torch.utils import _pytree as pytree

from .options import log, options

TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 5e-3, torch.float32: 1e-4, torch.float64: 1e-9}
_calls = None  # enable()'s choice; None: DYNGEN_CHECK_GRAPHS
_results: dict = {}


def enable(calls: int | None = 2) -> None:
    """Check each graph's first `calls` calls (0: none; None: as DYNGEN_CHECK_GRAPHS says)."""
    global _calls
    _calls = calls


def _limit() -> int:
    return options().check_graphs if _calls is None else _calls


def enabled() -> bool:
    return _limit() > 0


def report() -> list[dict]:
    return [dict(r) for r in _results.values()]


def _rel(got, want) -> float:
    if got is None or want is None:
        return 0.0 if got is None and want is None else float("inf")
    got, want = got.detach().double(), want.detach().double()
    if got.shape != want.shape:
        return float("inf")
    d = (got - want).norm()
    return float(d / want.norm()) if want.norm() > 0 else float(d)


def _copy(a):
    if not isinstance(a, torch.Tensor):
        return a
    c = a.detach().clone(memory_format=torch.preserve_format)
    return c.requires_grad_(a.requires_grad)


def _tensors(out) -> list:
    return [t for t in pytree.tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def _run(fn, args):
    """(the leaves gradients are taken for, the outputs): a graph may update an input in place
    (DBRX's qkv.clamp_), which autograd allows on the caller's non-leaf tensor and not on a leaf,
    so the function gets a clone of each leaf that requires grad."""
    xs = [_copy(a) for a in args]
    with torch.enable_grad():
        out = _tensors(
            fn(*[x.clone() if isinstance(x, torch.Tensor) and x.requires_grad else x for x in xs])
        )
    return xs, out


def check(name: str, gm, fn, args) -> dict:
    """One comparison of `fn` (compiled) with `gm` (eager) on copies of `args`."""
    r = _results.setdefault(
        name,
        {"graph": name, "calls": 0, "fwd_rel": 0.0, "grad_rel": 0.0, "bad": False, "worst": ""},
    )
    xs_c, out_c = _run(fn, args)
    xs_e, out_e = _run(gm, args)
    r["calls"] += 1
    tol = 0.0
    for i, (c, e) in enumerate(zip(out_c, out_e)):
        d = _rel(c, e)
        tol = max(tol, TOLERANCE.get(e.dtype, 0.0))
        if d > r["fwd_rel"]:
            r["fwd_rel"], r["worst"] = d, f"output {i} {e.dtype}{list(e.shape)}"
    if torch.is_grad_enabled():
        pairs = [
            (c, e)
            for c, e in zip(out_c, out_e)
            if e.requires_grad and c.requires_grad and e.is_floating_point()
        ]
        wrt = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
        if pairs and wrt:
            g = torch.Generator().manual_seed(0)
            cot = [
                torch.randn(e.shape, generator=g, dtype=torch.float32).to(e.dtype) for _, e in pairs
            ]
            try:
                gc = torch.autograd.grad(
                    [c for c, _ in pairs], [xs_c[i] for i in wrt], cot, allow_unused=True
                )
                ge = torch.autograd.grad(
                    [e for _, e in pairs], [xs_e[i] for i in wrt], cot, allow_unused=True
                )
            except RuntimeError as e:  # a graph the copies cannot replay: said, not fatal
                r["grad_error"] = f"{type(e).__name__}: {e}"[:300]
                log.warning(
                    "dyngen graph check: %s: gradients not compared: %s", name, r["grad_error"]
                )
                gc = ge = ()
            for i, a, b in zip(wrt, gc, ge):
                d = _rel(a, b)
                tol = max(tol, TOLERANCE.get(args[i].dtype, 0.0))
                if d > r["grad_rel"]:
                    r["grad_rel"] = d
                    if d > r["fwd_rel"]:
                        r["worst"] = f"grad of input {i} {args[i].dtype}{list(args[i].shape)}"
    if max(r["fwd_rel"], r["grad_rel"]) > 1e-6:
        r["code"] = gm.code  # any difference: what the graph computes, for the reader
    if max(r["fwd_rel"], r["grad_rel"]) > max(tol, 1e-6) and not r["bad"]:
        r["bad"] = True
        _save(name, gm, args)
        log.warning(
            "dyngen graph check: %s differs from eager: forward %.3g, gradients %.3g (worst: %s)",
            name,
            r["fwd_rel"],
            r["grad_rel"],
            r["worst"],
        )
    return r


def _save(name, gm, args) -> None:
    """DYNGEN_CHECK_GRAPHS_DIR=dir: a bad graph's module and inputs as dir/<name>.pt, to replay
    (torch.load(..., weights_only=False): {"gm", "args"})."""
    d = options().check_graphs_dir
    if not d:
        return
    os.makedirs(d, exist_ok=True)
    try:
        torch.save(
            {"code": gm.code, "args": [_copy(a) for a in args]},
            os.path.join(d, f"{name.replace('#', '_')}.pt"),
        )
    except Exception as e:  # noqa: BLE001 - a debugging aid: the check's verdict stands
        log.warning("dyngen graph check: could not save %s: %s", name, e)


class Checked:
    """A compiled graph whose first calls are checked against eager (Note [Checking graphs
    against eager])."""

    def __init__(self, name, gm, fn):
        self.name, self.gm, self.fn, self.seen = name, gm, fn, 0

    def __call__(self, *args):
        if self.seen < _limit():
            self.seen += 1
            check(f"{self.name}#{self.seen}", self.gm, self.fn, args)
        return self.fn(*args)


def wrap(name: str, gm, fn):
    return Checked(name, gm, fn) if enabled() else fn


def wrap_backend(backend):
    """Any torch.compile backend, its graphs checked against eager (named graph0, graph1, ...)."""
    count = [0]

    def checked_backend(gm, example_inputs, **kw):
        name = f"graph{count[0]}"
        count[0] += 1
        return wrap(name, gm, backend(gm, example_inputs, **kw))

    return checked_backend


def reset() -> None:
    _results.clear()
