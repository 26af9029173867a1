"""ctypes signatures of the graph builder section of runtime/dyngen.h (One IR); bound onto the
library capi.load() returns, once."""
from __future__ import annotations

import ctypes
import threading

from . import capi

_P = ctypes.c_void_p
_I32 = ctypes.c_int32
_I64 = ctypes.c_int64
_PI32 = ctypes.POINTER(ctypes.c_int32)
_SIGNATURES = {
    "dg_builder_new": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P)]),
    "dg_builder_free": (None, [_P]),
    "dg_builder_symbol": (ctypes.c_int, [_P, ctypes.c_char_p, _I64, _I64, _I64, _PI32]),
    "dg_builder_const": (ctypes.c_int, [_P, _I64, _PI32]),
    "dg_builder_expr": (ctypes.c_int, [_P, ctypes.c_char_p, _I32, _I32, _PI32]),
    "dg_builder_expr_info": (ctypes.c_int, [_P, _I32, ctypes.POINTER(_I64), ctypes.POINTER(_I64),
                                            ctypes.POINTER(ctypes.c_int),
                                            ctypes.POINTER(ctypes.c_int)]),
    "dg_builder_provably_ge": (ctypes.c_int, [_P, _I32, _I32, ctypes.POINTER(ctypes.c_int)]),
    "dg_builder_expr_str": (ctypes.c_int, [_P, _I32, ctypes.POINTER(ctypes.c_void_p)]),
    "dg_builder_expr_eval": (ctypes.c_int, [_P, _I32, ctypes.POINTER(ctypes.c_char_p),
                                            ctypes.POINTER(_I64), ctypes.c_int,
                                            ctypes.POINTER(_I64)]),
    "dg_builder_input": (ctypes.c_int, [_P, _I32, _PI32, ctypes.c_int, _PI32]),
    "dg_builder_sym_input": (ctypes.c_int, [_P, _I32, _PI32]),
    "dg_builder_attr_int": (ctypes.c_int, [_P, ctypes.c_char_p, _I64]),
    "dg_builder_attr_float": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_double]),
    "dg_builder_attr_ints": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(_I64),
                                            ctypes.c_int]),
    "dg_builder_attr_syms": (ctypes.c_int, [_P, ctypes.c_char_p, _PI32, ctypes.c_int]),
    "dg_builder_attr_dtype": (ctypes.c_int, [_P, ctypes.c_char_p, _I32]),
    "dg_builder_op": (ctypes.c_int, [_P, ctypes.c_char_p, _PI32, ctypes.c_int, _PI32]),
    "dg_builder_value_type": (ctypes.c_int, [_P, _I32, _PI32, _PI32, _PI32]),
    "dg_builder_output": (ctypes.c_int, [_P, _I32]),
    "dg_builder_finish": (ctypes.c_int, [_P, ctypes.POINTER(_P)]),
    "dg_graph_to_builder": (ctypes.c_int, [_P, ctypes.POINTER(_P)]),
    "dg_builder_symbols": (ctypes.c_int, [_P, _PI32, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]),
    "dg_builder_inputs": (ctypes.c_int, [_P, _PI32, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]),
    "dg_builder_num_nodes": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_int)]),
    "dg_graph_write_fb": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_void_p),
                                         ctypes.POINTER(ctypes.c_size_t)]),
}

_bound = None
_lock = threading.Lock()


def lib():
    """The C library with the builder functions typed (raises LibraryNotFound without it)."""
    global _bound
    if _bound is not None:
        return _bound
    with _lock:
        if _bound is None:
            lib = capi.load()
            for name, (res, args) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, args
            _bound = lib
    return _bound
