"""The GPU path from Python, through the driver double (tests/driver_double): CPU tensors are
passed as device 0's memory (DYNGEN_TEST_DRIVER_DOUBLE=1), so the seed's forward and backward go
through dg_launch, cuda_driver, kernel_module and the double's checks, and run as the kernels'
host emulation. Each case is a subprocess: the driver is chosen once per process."""

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO

DOUBLE = REPO / "build" / "libdg_driver_double.so"

SCRIPT = r"""
import ctypes, json, os, sys
import torch
import dyngen
from dyngen.core.ir import GraphBuilder
from dyngen.executors import runtime
from dyngen.executors.native import CapiGraphRunner
from helpers import assert_close

torch.manual_seed(0)
text = open(sys.argv[1]).read()
exe = dyngen.compile_text(text, "seed")
# The same graph on the host target directly: the double's path (device pointers, launches,
# copies) must give what the host path gives.
ref = CapiGraphRunner(text, target="host")
graph = GraphBuilder.from_text(text)
double = ctypes.CDLL(os.environ["DYNGEN_CUDA_DRIVER"])
double.dgdbl_calls.restype = ctypes.c_char_p
out = {"target": exe.target, "kind": exe.kind}
for n in (2, 37):
    ins = []
    for vid in graph.inputs:
        v = graph.values[vid]
        if v.is_sym:
            ins.append(n)
        else:
            shape = [d.evaluate({"s0": n}) for d in v.type.shape]
            ins.append((torch.randn(shape) * 0.05).to(v.type.dtype.torch))
    double.dgdbl_clear_calls()
    got = exe.run(ins)
    calls = double.dgdbl_calls().decode()
    for g, w in zip(got, ref.run(ins)):
        assert_close(g, w, f"s0={n}")
    out["launches"] = calls.count("cuLaunchKernel")
    out["refused"] = calls.count("refused")

# A Python float under dynamic=True is a 0-d f64 CPU tensor: a host scalar beside "GPU" tensors.
def f(x, w, scale):
    return torch.nn.functional.silu(x @ w.t()) * scale
compiled = torch.compile(f, backend=dyngen.aot.backend, dynamic=True)
w = torch.randn(6, 8, requires_grad=True)
w_ref = w.detach().clone().requires_grad_(True)
double.dgdbl_clear_calls()
for n, scale in ((4, 0.5), (7, 2.0)):  # forward and backward graphs, both through the double
    x = torch.randn(n, 8)
    got, want = compiled(x, w, scale), f(x, w_ref, scale)
    assert_close(got, want, f"scaled n={n}")
    got.square().sum().backward()
    want.square().sum().backward()
    assert_close(w.grad, w_ref.grad, f"scaled n={n} weight grad")
calls = double.dgdbl_calls().decode()
out["scalar_copies"] = calls.count("cuMemcpyHtoDAsync")

# The seed's routed LoRA expert at a small size, trained two steps: its forward and its fused
# backward (grad_x as one GEMM over the gate and up gradients) through the double, against eager.
from helpers import check_lora_grads, make, train_loop
model, eager = make(256, 128, 8)
compiled = torch.compile(model, backend=dyngen.aot.backend, dynamic=True)
double.dgdbl_clear_calls()
train_loop(compiled, eager, [5, 37], 256)
check_lora_grads(model, eager)
calls = double.dgdbl_calls().decode()
out["expert_launches"] = calls.count("cuLaunchKernel")
out["refused"] += calls.count("refused")
out["fallbacks"] = dyngen.stats()["fallbacks"]
out["executor"] = dyngen.stats()["executor"]
print("RESULT " + json.dumps(out))
"""


def run_double(tmp_path, graph):
    if not DOUBLE.is_file():
        pytest.skip(f"{DOUBLE} is not built")
    env = dict(
        os.environ,
        DYNGEN_CUDA_DRIVER=str(DOUBLE),
        DYNGEN_TEST_DRIVER_DOUBLE="1",
        DYNGEN_STRICT="1",
        DG_DOUBLE_DEVICES="1",
        DYNGEN_CACHE_DIR=os.environ.get("DYNGEN_CACHE_DIR", str(tmp_path / "cache")),
    )
    env["PYTHONPATH"] = os.pathsep.join(
        [
            str(REPO / "frontends" / "python"),
            str(REPO / "tests" / "python"),
            str(REPO / "frontends" / "python" / "tools"),
        ]
    )
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(graph)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def test_seed_forward_and_backward_through_the_driver_double(tmp_path):
    r = run_double(tmp_path, REPO / "tests" / "python" / "golden" / "seed_expert_mlp.ir")
    assert (r["target"], r["kind"]) == ("cuda:0", "capi")
    assert r["launches"] > 0 and r["refused"] == 0
    assert r["scalar_copies"] >= 4  # the 0-d f64 scale went by value, forward and backward
    assert r["fallbacks"] == [] and r["executor"] == "cuda"  # the GPU path, not the emulation
    assert r["expert_launches"] > 0  # the routed expert's forward and backward graphs
