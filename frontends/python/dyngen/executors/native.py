"""The C executor's GraphRunner: one graph compiled by libdyngen.so and called through the C API's
call path (Note [The call path]); the ATen executor (aten_executor.py) is its twin
(Note [Executor choice])."""

from __future__ import annotations

import ctypes
import threading

import torch

from ..core.capi import (
    _DG_TENSOR,
    _P,
    _TORCH_DTYPE,
    DG_MAX_RANK,
    DgCompileOptions,
    DgTensor,
    _check,
    _pack_inputs,
    load,
    load_graph,
)
from ..core.ir import Graph
from ..errors import LaunchError
from ..options import options
from .graph_runner import GraphRunner


class CapiGraphRunner(GraphRunner):
    """One graph compiled by the core (dg_compile). `source` is a built Graph, compiled from the
    core's graph handle as it is (what the frontend sends: no graph.fb round trip), graph.fb bytes
    (a dumped graph) or the IR text (debugging)."""

    kind = "capi"

    def __init__(
        self,
        source: Graph | bytes | str,
        target: str | None = None,
        emit_dir: str | None = None,
        host_memory_as_device: bool = False,
        source_arch: str | None = None,
        disabled_passes: tuple | None = None,
    ):
        """`emit_dir`: a folder for the core's IR after each pass and the generated source.
        `host_memory_as_device`: CPU tensors are passed as device 0's (the driver double).
        `source_arch`: the arch the kernels are generated for when not the target's ("sm_90a"
        with target "host": the sm_90a kernels under the emulation).
        `disabled_passes`: pass names to skip; None: DYNGEN_DISABLE_PASSES (options())."""
        lib = load()
        self._lib = lib
        self._as_device = host_memory_as_device
        self.target = target
        if disabled_passes is None:
            disabled_passes = options().disabled_passes
        self.disabled_passes = tuple(disabled_passes)
        if isinstance(source, Graph):
            g, owned = source.handle, False
            if g is None:
                raise ValueError(f"graph {source.name} has no outputs: nothing to compile")
        else:
            g, owned = load_graph(source), True
        try:
            opts = DgCompileOptions(
                target.encode() if target else None,
                None,
                emit_dir.encode() if emit_dir else None,
                ",".join(self.disabled_passes).encode() if self.disabled_passes else None,
                source_arch.encode() if source_arch else None,
            )
            exe = _P()
            _check(lib.dg_compile(g, ctypes.byref(opts), ctypes.byref(exe)), "dg_compile")
        finally:
            if owned:
                lib.dg_graph_free(g)
        self._exe = exe
        # The call path's two entry points with every pointer passed as an integer: ctypes then
        # converts each argument without checking a Structure array's type (Note [The call path]).
        addr, i32 = ctypes.c_void_p, ctypes.c_int
        self._launch = ctypes.CFUNCTYPE(i32, addr, addr, i32, addr, i32, addr, addr)(
            ("dg_launch", lib)
        )
        self._dry_run = ctypes.CFUNCTYPE(i32, addr, addr, i32, addr, i32, addr)(
            ("dg_launch_dry_run", lib)
        )
        self._handle = exe.value
        key = ctypes.create_string_buffer(65)
        hit, nin, nout = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        _check(
            lib.dg_executable_info(
                exe, key, ctypes.byref(hit), ctypes.byref(nin), ctypes.byref(nout)
            ),
            "dg_executable_info",
        )
        self.key = key.value.decode()
        self.cache_hit = {0: "miss", 1: "memory", 2: "disk"}.get(hit.value, "miss")
        self.num_inputs, self.num_outputs = nin.value, nout.value

    def __del__(self):
        exe = getattr(self, "_exe", None)
        if exe:
            self._lib.dg_executable_free(exe)
            self._exe = None

    def _prepare(self, inputs):
        """Packs the inputs, runs dg_prepare; returns (inputs, outputs as DgTensor arrays, the
        outputs' (shape, torch dtype) and the workspace bytes)."""
        if len(inputs) != self.num_inputs:
            raise LaunchError(f"expected {self.num_inputs} inputs, got {len(inputs)}")
        ins = _pack_inputs(inputs, self._as_device)
        nout = self.num_outputs
        out_buf = bytearray(_DG_TENSOR.size * max(1, nout))
        outs = (DgTensor * max(1, nout)).from_buffer(out_buf)
        ws = ctypes.c_size_t()
        _check(
            self._lib.dg_prepare(self._exe, ins, len(inputs), outs, nout, ctypes.byref(ws)),
            "dg_prepare",
        )
        specs = []
        for k in range(nout):
            f = _DG_TENSOR.unpack_from(out_buf, k * _DG_TENSOR.size)
            rank = f[1 + DG_MAX_RANK]
            specs.append((tuple(f[1 : 1 + rank]), _TORCH_DTYPE[f[2 + DG_MAX_RANK]]))
        return ins, outs, specs, ws.value

    def prepare(self, inputs):
        return self._prepare(inputs)[2]

    # Note [The call path]
    # A call reads each input tensor's shape, dtype, device and data pointer, and looks up by all
    # but the pointers a plan made by dg_prepare (once per token count and device): the inputs'
    # and outputs' DgTensor arrays, already packed but for their data pointers, the outputs'
    # shapes and dtypes (as expanded 0-d tensors), a tensor on the outputs' device and the
    # workspace size. It writes the pointers into the plan's arrays (one 8-byte store each),
    # allocates each output with torch.empty_like of its expanded 0-d tensor (a quarter of
    # torch.empty's cost with a size, dtype and device to parse, and on the right device whatever
    # torch.set_default_device says), reuses this thread's workspace while it is large enough
    # and the stream is the same (kernels on one stream run in order, so the next call's kernels
    # cannot overtake this call's), and makes one ctypes call. dg_launch checks every argument
    # again, so a plan cannot launch wrong work. bench/python/host_overhead.py measures this path.
    _PLANS_MAX = 256

    def _state(self):
        """This thread's plans and workspace."""
        tls = self.__dict__.get("_tls")
        if tls is None:
            tls = self.__dict__.setdefault("_tls", threading.local())
        st = getattr(tls, "st", None)
        if st is None:
            st = tls.st = _CallState()
        return st

    def _plan(self, st, inputs, key):
        """Packs these inputs, runs dg_prepare and keeps the plan under `key`."""
        ins, outs, specs, ws_bytes = self._prepare(inputs)  # LaunchError names a bad input
        # Outputs go where the kernels run: the CUDA tensors' device (a 0-d CPU scalar beside
        # them does not count), else the CPU.
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        like = next((x for x in tensors if x.is_cuda), None)
        if like is None:
            like = next((x for x in tensors if x.device.type == "cpu"), None)
        like = torch.empty(0) if like is None else like.new_empty(0)  # holds no input alive
        # One expanded 0-d tensor per output: empty_like of it is a new contiguous tensor of the
        # output's shape, without parsing a size and dtype on every call.
        protos = [like.new_empty((), dtype=dtype).expand(shape) for shape, dtype in specs]
        if not all(torch.empty_like(p).is_contiguous() for p in protos):
            raise LaunchError("torch.empty_like of an expanded tensor is not contiguous here")
        words = _DG_TENSOR.size // 8  # the data pointer is each dg_tensor's first word
        in_slots = [k * words for k, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
        if len(st.plans) >= self._PLANS_MAX:
            st.plans.clear()
        plan = st.plans[key] = _Plan(ins, in_slots, outs, words, protos, ws_bytes, like)
        return plan

    def run(self, inputs, *, dry_run: bool = False):
        """Computes the outputs (Note [The call path]). dry_run=True does the whole call path
        but calls dg_launch_dry_run, which binds the symbols, runs the shape program and packs
        the kernel arguments without launching: the outputs come back uninitialized (for
        measuring host overhead)."""
        n = len(inputs)
        if n != self.num_inputs:
            raise LaunchError(f"expected {self.num_inputs} inputs, got {n}")
        st = self._state()
        key, pointers = [], []
        note, point = key.append, pointers.append
        for x in inputs:
            if type(x) is int:
                note(x)
            elif isinstance(x, torch.Tensor):
                note(x.shape)
                note(x.dtype)
                note(x.get_device())  # -1 on the CPU
                point(x.data_ptr())
            else:
                note(int(x))  # a SymInt-like value; Tensor-likes that are not Tensors fail here
        key = tuple(key)
        plan = st.plans.get(key) or self._plan(st, inputs, key)
        words = plan.in_words
        for slot, ptr in zip(plan.in_slots, pointers):
            words[slot] = ptr
        results, words, step, empty_like = [], plan.out_words, plan.step, torch.empty_like
        for k, proto in enumerate(plan.protos):
            r = empty_like(proto)
            words[k * step] = r.data_ptr()
            results.append(r)
        cuda = plan.cuda_index
        stream = None if cuda is None else torch._C._cuda_getCurrentRawStream(cuda)
        ws_ptr, ws_bytes = None, plan.ws_bytes
        if ws_bytes:
            ws, on = st.workspace, (plan.like.device, stream)
            if ws is None or ws.numel() < ws_bytes or st.workspace_on != on:
                ws = st.workspace = plan.like.new_empty(ws_bytes, dtype=torch.uint8)
                st.workspace_on = on
            ws_ptr = ws.data_ptr()
        nout = len(results)
        if dry_run:
            rc = self._dry_run(self._handle, plan.ins_at, n, plan.outs_at, nout, ws_ptr)
            if rc:
                _check(rc, "dg_launch_dry_run")
            return results
        rc = self._launch(self._handle, plan.ins_at, n, plan.outs_at, nout, ws_ptr, stream)
        if rc:
            _check(rc, "dg_launch")
        return results


class _Plan:
    """What a call needs for inputs of one set of shapes, dtypes and devices (Note [The call
    path]): the packed argument arrays with 64-bit views for writing data pointers."""

    __slots__ = (
        "ins",
        "in_slots",
        "in_words",
        "outs",
        "out_words",
        "step",
        "protos",
        "ws_bytes",
        "like",
        "cuda_index",
        "ins_at",
        "outs_at",
    )

    def __init__(self, ins, in_slots, outs, step, protos, ws_bytes, like):
        self.ins, self.in_slots, self.outs, self.step = ins, in_slots, outs, step
        self.in_words = memoryview(ins).cast("B").cast("Q")
        self.out_words = memoryview(outs).cast("B").cast("Q")
        self.ins_at, self.outs_at = ctypes.addressof(ins), ctypes.addressof(outs)
        self.protos, self.ws_bytes, self.like = protos, ws_bytes, like
        self.cuda_index = like.get_device() if like.is_cuda else None


class _CallState:
    """Per thread and runner: the plans, and the workspace with the (device, stream) it was
    last used on."""

    __slots__ = ("plans", "workspace", "workspace_on")

    def __init__(self):
        self.plans, self.workspace, self.workspace_on = {}, None, None
