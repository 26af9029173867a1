"""A class of a transformers module replaced process-wide by a shim, and put back: the PhiMoE
multiplier shims of both generations (models.py, hf5_shims.py) use it."""

from __future__ import annotations


def swap_class(module, attr: str, replacement) -> None:
    """module.<attr> becomes `replacement`; the original is kept (once) for restore_class."""
    if getattr(module, attr) is not replacement:
        setattr(module, f"_bench_original_{attr}", getattr(module, attr))
        setattr(module, attr, replacement)


def restore_class(module, attr: str) -> None:
    """Undoes swap_class (nothing when it did not run)."""
    original = getattr(module, f"_bench_original_{attr}", None)
    if original is not None:
        setattr(module, attr, original)
