"""ctypes binding of the C API (runtime/dyngen.h) and the C Executable (Note [Executor choice]).

The library is found at $DYNGEN_LIB, else next to this package (an installed package), else in
<repo>/build (a checkout).
Every function returns DG_OK or an error code with a message from dg_last_error().
Graphs reach the core as graph.fb bytes (the core's writer, `dg_graph_load`); the IR text form
(`dg_graph_load_text`) is accepted too, for debugging and for comparing the two.
"""
from __future__ import annotations

import ctypes
import struct
import threading
from pathlib import Path

import torch

from .errors import InvalidGraph, LaunchError, LibraryNotFound, Unsupported
from .ops import DType
from .options import options
from .runtime import Executable

DG_MAX_RANK = 8
DG_OK, DG_ERR_INTERNAL, DG_ERR_INVALID_INPUT, DG_ERR_UNSUPPORTED, DG_ERR_COMPILE, DG_ERR_LAUNCH = (
    range(6))


DG_DEVICE_HOST, DG_DEVICE_CUDA = 0, 1


class DgTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.c_int64 * DG_MAX_RANK),
                ("rank", ctypes.c_int32), ("dtype", ctypes.c_int32),
                ("device_type", ctypes.c_int32), ("device_index", ctypes.c_int32)]


class DgCompileOptions(ctypes.Structure):
    _fields_ = [("target", ctypes.c_char_p), ("cache_dir", ctypes.c_char_p),
                ("emit_dir", ctypes.c_char_p), ("disabled_passes", ctypes.c_char_p)]


class DgStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in (
        "graphs_compiled", "nvrtc_compiles", "cache_hits_memory", "cache_hits_disk",
        "cache_misses", "cache_corrupt", "launches")]


_P = ctypes.c_void_p
_SIGNATURES = {
    "dg_version": (ctypes.c_char_p, []),
    "dg_last_error": (ctypes.c_char_p, []),
    "dg_graph_load": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_P)]),
    "dg_graph_load_text": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P)]),
    "dg_graph_free": (None, [_P]),
    "dg_graph_hash": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "dg_graph_print": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_void_p)]),
    "dg_free": (None, [ctypes.c_void_p]),
    "dg_compile": (ctypes.c_int, [_P, ctypes.POINTER(DgCompileOptions), ctypes.POINTER(_P)]),
    "dg_executable_free": (None, [_P]),
    "dg_executable_info": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int),
                                          ctypes.POINTER(ctypes.c_int),
                                          ctypes.POINTER(ctypes.c_int)]),
    "dg_executable_describe": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_void_p)]),
    "dg_prepare": (ctypes.c_int, [_P, ctypes.POINTER(DgTensor), ctypes.c_int,
                                  ctypes.POINTER(DgTensor), ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_size_t)]),
    "dg_launch": (ctypes.c_int, [_P, ctypes.POINTER(DgTensor), ctypes.c_int,
                                 ctypes.POINTER(DgTensor), ctypes.c_int, ctypes.c_void_p,
                                 ctypes.c_void_p]),
    "dg_launch_dry_run": (ctypes.c_int, [_P, ctypes.POINTER(DgTensor), ctypes.c_int,
                                         ctypes.POINTER(DgTensor), ctypes.c_int, ctypes.c_void_p]),
    "dg_get_stats": (None, [ctypes.POINTER(DgStats)]),
    "dg_reset_stats": (None, []),
}

_lib = None
_lock = threading.Lock()


def library_candidates() -> list[Path]:
    here = Path(__file__).resolve().parent
    out = []
    if options().lib_path:
        out.append(Path(options().lib_path))
    # An installed package carries its own library; a checkout uses its build folder.
    out.append(here / "libdyngen.so")
    repo = here.parent.parent.parent  # frontends/python/dyngen -> repo root
    if (repo / "CMakeLists.txt").is_file():
        out.append(repo / "build" / "libdyngen.so")
    return out


def load():
    """The loaded library; raises LibraryNotFound naming every place it looked."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in library_candidates():
            if not path.is_file():
                tried.append(f"{path} (absent)")
                continue
            try:
                lib = ctypes.CDLL(str(path))
                for name, (res, args) in _SIGNATURES.items():
                    fn = getattr(lib, name)
                    fn.restype, fn.argtypes = res, args
            except (OSError, AttributeError) as e:
                tried.append(f"{path} ({e})")
                continue
            _lib = lib
            return lib
        raise LibraryNotFound("libdyngen.so not found; set DYNGEN_LIB or build it into "
                              "<repo>/build. Tried: " + "; ".join(tried))


def _check(rc: int, what: str) -> None:
    if rc == DG_OK:
        return
    msg = (_lib.dg_last_error() or b"").decode(errors="replace")
    if rc == DG_ERR_UNSUPPORTED:
        raise Unsupported(f"{what}: {msg}")
    if rc == DG_ERR_LAUNCH:
        raise LaunchError(f"{what}: {msg}")
    raise RuntimeError(f"{what} failed (code {rc}): {msg}")


def get_stats() -> dict:
    s = DgStats()
    load().dg_get_stats(ctypes.byref(s))
    return {n: getattr(s, n) for n, _ in DgStats._fields_}


def reset_stats() -> None:
    load().dg_reset_stats()


# Note [Packing dg_tensor arguments]
# A call converts every input to a dg_tensor. Building ctypes Structures field by field costs
# microseconds per tensor; one precompiled struct.Struct packs a whole dg_tensor (data pointer,
# eight int64 dims, rank, dtype, device type and index) into a bytearray that a DgTensor array
# then views. Outputs are read back the same way. test_ctypes_binding_matches_dyngen_h checks the
# layout.
_DG_TENSOR = struct.Struct(f"@P{DG_MAX_RANK}qiiii")
_ZEROS = (0,) * DG_MAX_RANK
_POINTER = struct.Struct("@P")
_DTYPE_CODE = {d.torch: d.value for d in DType}
_TORCH_DTYPE = {d.value: d.torch for d in DType}


def _pack_inputs(inputs, host_memory_as_device: bool = False) -> ctypes.Array:
    """Note [Packing dg_tensor arguments]: the inputs as a DgTensor array. CUDA tensors carry
    their device; CPU tensors are host memory, or with `host_memory_as_device` (the driver
    double's test switch) device 0's memory, except rank-0 ones, which stay host scalars."""
    size = _DG_TENSOR.size
    buf = bytearray(size * max(1, len(inputs)))
    pack = _DG_TENSOR.pack_into
    for k, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            shape = x.shape
            rank = len(shape)
            code = _DTYPE_CODE.get(x.dtype)
            if code is None:
                raise LaunchError(f"input {k}: dtype {x.dtype} is not supported")
            if rank > DG_MAX_RANK:
                raise LaunchError(f"input {k}: rank {rank} is above {DG_MAX_RANK}")
            if x.is_cuda:
                where, index = DG_DEVICE_CUDA, x.get_device()
            elif host_memory_as_device and rank:
                where, index = DG_DEVICE_CUDA, 0
            else:
                where, index = DG_DEVICE_HOST, 0
            pack(buf, k * size, x.data_ptr(), *shape, *_ZEROS[rank:], rank, code, where, index)
        else:  # a symbolic-integer argument
            pack(buf, k * size, 0, int(x), *_ZEROS[1:], -1, 0, 0, 0)
    return (DgTensor * max(1, len(inputs))).from_buffer(buf)


def _to_dg(x) -> DgTensor:
    """One argument as a DgTensor (tests and tools; calls use _pack_inputs)."""
    return _pack_inputs([x])[0]


def load_graph(source: "bytes | str"):
    """A dg_graph handle (free with dg_graph_free) from graph.fb bytes or the IR text; raises
    InvalidGraph with the core's message when it refuses the input."""
    lib = load()
    g = _P()
    if isinstance(source, str):
        what, rc = "dg_graph_load_text", lib.dg_graph_load_text(source.encode(), ctypes.byref(g))
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        what, rc = "dg_graph_load", lib.dg_graph_load(data, len(data), ctypes.byref(g))
    else:
        raise TypeError(f"a graph is graph.fb bytes or IR text, not {type(source).__name__}")
    if rc == DG_ERR_INVALID_INPUT:
        msg = (lib.dg_last_error() or b"").decode(errors="replace")
        raise InvalidGraph(f"{what}: {msg}")
    _check(rc, what)
    return g


class CapiExecutable(Executable):
    """One graph compiled by the core. `source` is graph.fb bytes (what the frontend sends) or the
    IR text (debugging)."""

    kind = "capi"

    def __init__(self, source: "bytes | str", target: str | None = None,
                 emit_dir: str | None = None, host_memory_as_device: bool = False):
        """`emit_dir`: a folder for the core's IR after each pass and the generated source.
        `host_memory_as_device`: CPU tensors are passed as device 0's (the driver double)."""
        lib = load()
        self._lib = lib
        self._as_device = host_memory_as_device
        self.target = target
        g = load_graph(source)
        try:
            opts = DgCompileOptions(target.encode() if target else None, None,
                                    emit_dir.encode() if emit_dir else None, None)
            exe = _P()
            _check(lib.dg_compile(g, ctypes.byref(opts), ctypes.byref(exe)), "dg_compile")
        finally:
            lib.dg_graph_free(g)
        self._exe = exe
        key = ctypes.create_string_buffer(65)
        hit, nin, nout = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        _check(lib.dg_executable_info(exe, key, ctypes.byref(hit), ctypes.byref(nin),
                                      ctypes.byref(nout)), "dg_executable_info")
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
        outputs' (shape, dtype code) and the workspace bytes)."""
        if len(inputs) != self.num_inputs:
            raise LaunchError(f"expected {self.num_inputs} inputs, got {len(inputs)}")
        ins = _pack_inputs(inputs, self._as_device)
        nout = self.num_outputs
        out_buf = bytearray(_DG_TENSOR.size * max(1, nout))
        outs = (DgTensor * max(1, nout)).from_buffer(out_buf)
        ws = ctypes.c_size_t()
        _check(self._lib.dg_prepare(self._exe, ins, len(inputs), outs, nout, ctypes.byref(ws)),
               "dg_prepare")
        specs = []
        for k in range(nout):
            f = _DG_TENSOR.unpack_from(out_buf, k * _DG_TENSOR.size)
            rank = f[1 + DG_MAX_RANK]
            specs.append((f[1:1 + rank], f[2 + DG_MAX_RANK]))
        return ins, outs, out_buf, specs, ws.value

    def prepare(self, inputs):
        _, _, _, specs, _ = self._prepare(inputs)
        return [(tuple(shape), _TORCH_DTYPE[code]) for shape, code in specs]


    # Note [The call path]
    # A call packs all its inputs with one struct.Struct (learnt from the first call: one
    # dg_tensor per input, of that input's rank) into a DgTensor array kept per thread, looks up
    # by the inputs' shapes and devices a plan made by dg_prepare (once per token count): the
    # outputs' shapes, dtypes and device, the workspace size, and a DgTensor array for the
    # outputs already filled but for their pointers. It allocates the outputs and the workspace
    # with torch and makes one ctypes call. dg_launch checks every argument again, so a stale plan
    # cannot launch wrong work. bench/python/host_overhead.py measures this path.
    _PLANS_MAX = 256

    def _state(self):
        """This thread's input array, packer and plans."""
        tls = self.__dict__.get("_tls")
        if tls is None:
            tls = self.__dict__.setdefault("_tls", threading.local())
        st = getattr(tls, "st", None)
        if st is None:
            st = tls.st = _CallState((DgTensor * max(1, self.num_inputs))())
        return st

    def _learn(self, st, inputs):
        """The packer for inputs like these: a tensor's rank fixes its dg_tensor's format (the
        unused dims are zero padding); a later input of another rank makes the pack fail and the
        call relearn."""
        fmt, kinds = "@", []
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.dim() <= DG_MAX_RANK:
                fmt += f"P{x.dim()}q{8 * (DG_MAX_RANK - x.dim())}xiiii"
                kinds.append(True)
            else:
                fmt += f"P{DG_MAX_RANK}qiiii"
                kinds.append(False)
        st.packer, st.kinds = struct.Struct(fmt), kinds

    def _plan(self, st, inputs, key):
        """Runs dg_prepare for these inputs (packed in st.ins) and keeps the plan under `key`."""
        nout = self.num_outputs
        outs = (DgTensor * max(1, nout))()
        ws = ctypes.c_size_t()
        _check(self._lib.dg_prepare(self._exe, st.ins, len(inputs), outs, nout, ctypes.byref(ws)),
               "dg_prepare")
        specs = []
        for k in range(nout):
            f = _DG_TENSOR.unpack_from(outs, k * _DG_TENSOR.size)
            rank = f[1 + DG_MAX_RANK]
            specs.append((tuple(f[1:1 + rank]), _TORCH_DTYPE[f[2 + DG_MAX_RANK]]))
        # Outputs go where the kernels run: the CUDA tensors' device (a 0-d CPU scalar beside
        # them does not count), else the CPU.
        device = next((x.device for x in inputs if isinstance(x, torch.Tensor) and x.is_cuda),
                      torch.device("cpu"))
        if len(st.plans) >= self._PLANS_MAX:
            st.plans.clear()
        plan = st.plans[key] = (specs, outs, ws.value, device, device.type == "cuda" and device)
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
        if st.packer is None:
            self._learn(st, inputs)
        codes, as_device = _DTYPE_CODE, self._as_device
        fields, key = [], []
        add, note = fields.extend, key.append
        try:
            for x, is_tensor in zip(inputs, st.kinds):
                if is_tensor:
                    shape = x.shape
                    if x.is_cuda:
                        where, index = DG_DEVICE_CUDA, x.get_device()
                    elif as_device and shape:
                        where, index = DG_DEVICE_CUDA, 0
                    else:
                        where, index = DG_DEVICE_HOST, 0
                    add((x.data_ptr(), *shape, len(shape), codes[x.dtype], where, index))
                    note(shape)
                    note(where + 2 * index)
                else:
                    v = int(x)
                    add((0, v, *_ZEROS[1:], -1, 0, 0, 0))
                    note(v)
            st.packer.pack_into(st.ins, 0, *fields)
        except (struct.error, KeyError, TypeError, AttributeError):
            _pack_inputs(inputs, as_device)  # raises LaunchError naming the input, or relearn:
            st.packer = None
            return self.run(inputs, dry_run=dry_run)
        key = tuple(key)
        plan = st.plans.get(key) or self._plan(st, inputs, key)
        specs, outs, ws_bytes, device, cuda = plan
        results = []
        if len(specs) == 1:
            shape, dtype = specs[0]
            r = torch.empty(shape, dtype=dtype, device=device)
            outs[0].data = r.data_ptr()
            results.append(r)
        else:
            for k, (shape, dtype) in enumerate(specs):
                r = torch.empty(shape, dtype=dtype, device=device)
                outs[k].data = r.data_ptr()
                results.append(r)
        ws_ptr = None
        if ws_bytes:
            ws = torch.empty(ws_bytes, dtype=torch.uint8, device=device)
            ws_ptr = ws.data_ptr()
        if dry_run:
            _check(self._lib.dg_launch_dry_run(self._exe, st.ins, n, outs, len(specs), ws_ptr),
                   "dg_launch_dry_run")
            return results
        stream = torch.cuda.current_stream(cuda).cuda_stream if cuda else None
        _check(self._lib.dg_launch(self._exe, st.ins, n, outs, len(specs), ws_ptr, stream),
               "dg_launch")
        return results


class _CallState:
    """Per thread and executable: the input DgTensor array, its packer, and the plans."""

    __slots__ = ("ins", "packer", "kinds", "plans")

    def __init__(self, ins):
        self.ins, self.packer, self.kinds, self.plans = ins, None, [], {}


def core_print(source: "bytes | str") -> tuple[str, str]:
    """(the core's print of a graph, its canonical hash), from graph.fb bytes or the IR text: the
    core's view of a graph the frontend wrote, for checking that the two sides agree."""
    lib = load()
    g = load_graph(source)
    try:
        out = ctypes.c_void_p()
        _check(lib.dg_graph_print(g, ctypes.byref(out)), "dg_graph_print")
        printed = ctypes.string_at(out).decode()
        lib.dg_free(out)
        key = ctypes.create_string_buffer(65)
        _check(lib.dg_graph_hash(g, key), "dg_graph_hash")
        return printed, key.value.decode()
    finally:
        lib.dg_graph_free(g)
