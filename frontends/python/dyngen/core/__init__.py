"""The C API binding: the library, graph handles, the IR builder and the element types (the
bottom layer: it imports nothing of the package above errors and options)."""
