"""Grouped experts: MoE layers as a few primitive ops instead of a Python loop over experts.

    ops.py       the torch.library primitives (expert_offsets, expert_order, grouped_mm,
                 grouped_mm_wgrad) with fakes, eager bodies and grouped_mm's autograd
    grouped.py   grouped_experts(): one MoE layer's experts written with the primitives
    adapters.py  the known transformers MoE blocks (OLMoE, PhiMoE, DBRX) switched to it, undoably

Importing the package registers the primitives.
"""

from . import ops  # noqa: F401  (registers torch.ops.dyngen.*)
