"""ctypes binding of the C API (runtime/dyngen.h) and the C Executable (Note [Executor choice]).

The library is found at $DYNGEN_LIB, else <repo>/build/libdyngen.so, else next to this package.
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


class DgTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape", ctypes.c_int64 * DG_MAX_RANK),
                ("rank", ctypes.c_int32), ("dtype", ctypes.c_int32)]


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
    repo = here.parent.parent.parent  # frontends/python/dyngen -> repo root
    out += [repo / "build" / "libdyngen.so", here / "libdyngen.so"]
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
# eight int64 dims, rank, dtype) into a bytearray that a DgTensor array then views. Outputs are
# read back the same way. test_ctypes_binding_matches_dyngen_h checks the layout.
_DG_TENSOR = struct.Struct(f"@P{DG_MAX_RANK}qii")
_ZEROS = (0,) * DG_MAX_RANK
_DTYPE_CODE = {d.torch: d.value for d in DType}
_TORCH_DTYPE = {d.value: d.torch for d in DType}


def _pack_inputs(inputs) -> ctypes.Array:
    """Note [Packing dg_tensor arguments]: the inputs as a DgTensor array."""
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
            pack(buf, k * size, x.data_ptr(), *shape, *_ZEROS[rank:], rank, code)
        else:  # a symbolic-integer argument
            pack(buf, k * size, 0, int(x), *_ZEROS[1:], -1, 0)
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
                 emit_dir: str | None = None):
        """`emit_dir`: a folder for the core's IR after each pass and the generated source."""
        lib = load()
        self._lib = lib
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
        ins = _pack_inputs(inputs)
        nout = self.num_outputs
        out_buf = bytearray(_DG_TENSOR.size * max(1, nout))
        outs = (DgTensor * max(1, nout)).from_buffer(out_buf)
        ws = ctypes.c_size_t()
        _check(self._lib.dg_prepare(self._exe, ins, len(inputs), outs, nout, ctypes.byref(ws)),
               "dg_prepare")
        specs = []
        for k in range(nout):
            f = _DG_TENSOR.unpack_from(out_buf, k * _DG_TENSOR.size)
            rank = f[-2]
            specs.append((f[1:1 + rank], f[-1]))
        return ins, outs, out_buf, specs, ws.value

    def prepare(self, inputs):
        _, _, _, specs, _ = self._prepare(inputs)
        return [(tuple(shape), _TORCH_DTYPE[code]) for shape, code in specs]

    def run(self, inputs, *, dry_run: bool = False):
        """Computes the outputs. dry_run=True does the whole call path (argument conversion,
        dg_prepare, output and workspace allocation) but calls dg_launch_dry_run, which binds
        the symbols, runs the shape program and packs the kernel arguments without launching:
        the outputs come back uninitialized (for measuring host overhead)."""
        ins, outs, out_buf, specs, ws_bytes = self._prepare(inputs)
        device = next((x.device for x in inputs if isinstance(x, torch.Tensor)),
                      torch.device("cpu"))
        results = []
        for k, (shape, code) in enumerate(specs):
            r = torch.empty(shape, dtype=_TORCH_DTYPE[code], device=device)
            struct.pack_into("@P", out_buf, k * _DG_TENSOR.size, r.data_ptr())
            results.append(r)
        ws = torch.empty(ws_bytes, dtype=torch.uint8, device=device) if ws_bytes else None
        ws_ptr = ws.data_ptr() if ws is not None else None
        n_in, lib = len(inputs), self._lib
        if dry_run:
            _check(lib.dg_launch_dry_run(self._exe, ins, n_in, outs, len(specs), ws_ptr),
                   "dg_launch_dry_run")
            return results
        stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None
        _check(lib.dg_launch(self._exe, ins, n_in, outs, len(specs), ws_ptr, stream), "dg_launch")
        return results


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
