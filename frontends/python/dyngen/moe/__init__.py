"""Grouped experts: MoE layers as a few primitive ops instead of a Python loop over experts.

    ops.py       the torch.library primitives (expert_offsets, expert_order, grouped_mm,
                 grouped_mm_wgrad) with fakes, eager bodies and grouped_mm's autograd
    grouped.py   grouped_experts(): one MoE layer's experts written with the primitives
    adapters.py  the known transformers MoE blocks (OLMoE, PhiMoE, DBRX) switched to it, undoably
    hf5_experts.py          transformers 5's fused experts with it: experts_implementation="dyngen"
    peft_param_wrapper.py   PEFT's ParamWrapper LoRA on those experts, factors fed to it

Importing the package registers the primitives, and on transformers 5 the experts implementation
"dyngen" (Note [transformers 5 fused experts]).
"""

from . import ops  # noqa: F401  (registers torch.ops.dyngen.*)
from .hf5_experts import register_experts_implementation

register_experts_implementation()
