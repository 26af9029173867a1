"""ctypes binding of the C API (runtime/dyngen.h): loading the library, its signatures, errors,
counters, graph handles and the dg_tensor argument layout. The GraphRunner over it is
executors/native.py (Note [Executor choice]).

The library is found at $DYNGEN_LIB, else next to this package (an installed package), else in
<repo>/build (a checkout).
Every function returns DG_OK or an error code with a message from dg_last_error().
Graphs built in Python are already the core's (a dg_graph handle, core/ir.py); load_graph reads
graph.fb bytes (`dg_graph_load`: dumped graphs, tests) and the IR text form (`dg_graph_load_text`,
for debugging and for comparing the two).
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
from pathlib import Path

import torch

from ..errors import InvalidGraph, LaunchError, LibraryNotFound, Unsupported
from ..options import options
from .ops import DType

DG_MAX_RANK = 8
DG_OK, DG_ERR_INTERNAL, DG_ERR_INVALID_INPUT, DG_ERR_UNSUPPORTED, DG_ERR_COMPILE, DG_ERR_LAUNCH = (
    range(6)
)


DG_DEVICE_HOST, DG_DEVICE_CUDA = 0, 1


class DgTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("shape", ctypes.c_int64 * DG_MAX_RANK),
        ("rank", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("device_type", ctypes.c_int32),
        ("device_index", ctypes.c_int32),
    ]


class DgCompileOptions(ctypes.Structure):
    _fields_ = [
        ("target", ctypes.c_char_p),
        ("cache_dir", ctypes.c_char_p),
        ("emit_dir", ctypes.c_char_p),
        ("disabled_passes", ctypes.c_char_p),
        ("source_arch", ctypes.c_char_p),
    ]


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
    "dg_executable_info": (
        ctypes.c_int,
        [
            _P,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int),
        ],
    ),
    "dg_executable_describe": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_void_p)]),
    "dg_prepare": (
        ctypes.c_int,
        [
            _P,
            ctypes.POINTER(DgTensor),
            ctypes.c_int,
            ctypes.POINTER(DgTensor),
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_size_t),
        ],
    ),
    "dg_launch": (
        ctypes.c_int,
        [
            _P,
            ctypes.POINTER(DgTensor),
            ctypes.c_int,
            ctypes.POINTER(DgTensor),
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ],
    ),
    "dg_launch_dry_run": (
        ctypes.c_int,
        [
            _P,
            ctypes.POINTER(DgTensor),
            ctypes.c_int,
            ctypes.POINTER(DgTensor),
            ctypes.c_int,
            ctypes.c_void_p,
        ],
    ),
    "dg_get_stats": (None, [ctypes.c_void_p]),  # a DgStats (below)
    "dg_reset_stats": (None, []),
    "dg_stats_count": (ctypes.c_int, []),
    "dg_stats_name": (ctypes.c_char_p, [ctypes.c_int]),
    "dg_stats_doc": (ctypes.c_char_p, [ctypes.c_int]),
    "dg_stats_values": (None, [ctypes.POINTER(ctypes.c_int64), ctypes.c_int]),
}

_lib = None
_lock = threading.Lock()


def library_candidates() -> list[Path]:
    package = Path(__file__).resolve().parent.parent  # the dyngen folder
    out = []
    if options().lib_path:
        out.append(Path(options().lib_path))
    # An installed package carries its own library; a checkout uses its build folder.
    out.append(package / "libdyngen.so")
    repo = package.parent.parent.parent  # frontends/python/dyngen -> repo root
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
        raise LibraryNotFound(
            "libdyngen.so not found; set DYNGEN_LIB or build it into "
            "<repo>/build. Tried: " + "; ".join(tried)
        )


def _check(rc: int, what: str) -> None:
    if rc == DG_OK:
        return
    msg = (_lib.dg_last_error() or b"").decode(errors="replace")
    if rc == DG_ERR_UNSUPPORTED:
        raise Unsupported(f"{what}: {msg}")
    if rc == DG_ERR_LAUNCH:
        raise LaunchError(f"{what}: {msg}")
    raise RuntimeError(f"{what} failed (code {rc}): {msg}")


# The C library's counters are listed once, in runtime/dyngen_stats.def; the library describes
# them (dg_stats_count, dg_stats_name, dg_stats_doc), so nothing here names them.
@functools.cache
def stat_docs() -> dict[str, str]:
    """{counter name: its one-line meaning}, in dg_stats's order."""
    lib = load()
    return {
        lib.dg_stats_name(i).decode(): lib.dg_stats_doc(i).decode()
        for i in range(lib.dg_stats_count())
    }


@functools.cache
def _dg_stats_struct() -> type[ctypes.Structure]:
    return type(
        "DgStats", (ctypes.Structure,), {"_fields_": [(n, ctypes.c_int64) for n in stat_docs()]}
    )


def __getattr__(name: str):
    # DgStats, the dg_stats struct, is built from the library's description when first used.
    if name == "DgStats":
        return _dg_stats_struct()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_stats() -> dict:
    """{counter name: value} of the C library, in dg_stats's order."""
    names = list(stat_docs())
    values = (ctypes.c_int64 * len(names))()
    load().dg_stats_values(values, len(names))
    return dict(zip(names, values))


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


def load_graph(source: bytes | str):
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


def core_print(source: bytes | str) -> tuple[str, str]:
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
