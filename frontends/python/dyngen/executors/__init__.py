"""IR -> something that runs: the C executor (native.py over core/capi.py), the reference
executor, the choice between them (runtime.py, Note [Executor choice]) and the kernel cache."""
