"""FX graph -> IR: the exporter (export.py), the per-node dispatch (node_to_ir.py) and the
handler registry (registry.py, Note [FX op handler registry]) with one module per op family,
and the random-draw hoist that prepares an ATen graph (random_draws.py)."""
