"""Errors the frontend raises."""


class Unsupported(Exception):
    """dyngen cannot take this graph: an op outside the catalog, or a construct it cannot express.

    The message names the op, e.g. "op nonzero (aten.nonzero.default)". The ThunderFX backend turns
    it into an eager fallback with this message as the recorded reason.
    """


class ExportError(Unsupported):
    """The exported IR would disagree with PyTorch (a type or shape mismatch): never run it."""


class LaunchError(RuntimeError):
    """A call whose inputs do not match the compiled graph (shapes, dtypes, symbol bindings)."""


class LibraryNotFound(RuntimeError):
    """libdyngen.so could not be loaded (see dyngen.core.capi.library_candidates)."""


class InvalidGraph(ValueError):
    """The core refused a graph (graph.fb or text): malformed, truncated, or failing verification.
    The message is the core's (dg_last_error), e.g. "not a dyngen graph.fb file"."""


class FallbackError(RuntimeError):
    """DYNGEN_STRICT=1: dyngen would have run a graph eagerly (or without its C library); the
    message names the graph and the reason (e.g. the unsupported op)."""


class FallbackWarning(UserWarning):
    """dyngen runs a graph eagerly, or without its C library: once per graph and reason."""
