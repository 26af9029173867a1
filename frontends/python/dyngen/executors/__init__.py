"""IR -> a GraphRunner (graph_runner.py) that runs it: the C executor (native.py over
core/capi.py), the ATen executor (aten_executor.py), the choice between them (runtime.py,
Note [Executor choice]) and the kernel cache."""
