"""FX graph -> IR: the exporter (export.py), the lowering dispatch (lowering.py) and registry
(registry.py, Note [Lowering registry]) with one module per op family, and the random-draw hoist
that prepares an ATen graph (random_draws.py)."""
