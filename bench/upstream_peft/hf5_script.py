"""What upstream's benchmark_peft.py meets on transformers 5 + PEFT 0.21 (the .venv-hf5 overlay),
and what run_upstream_peft.py supplies for it without editing the installed script.

Note [Upstream benchmark_peft on transformers 5]
The script pins transformers 4.55; run as written on transformers 5.23 + PEFT 0.21:
- Model construction works unchanged: `AutoModelForCausalLM.from_config(config,
  torch_dtype=...)` still honours `torch_dtype` (a deprecation warning; `dtype` is the new name),
  and the experts implementation defaults to transformers' "grouped_mm" (`torch._grouped_mm`,
  which dyngen lowers, Note [torch._grouped_mm lowering]).
- Materialising works, but its `to_empty` + `reset_parameters` leaves RMSNorm weights and fused
  experts as garbage under either generation (Note [Every parameter initialised]). transformers
  5's `_init_weights` also initialises the rotary buffers; PhiMoE's rotary still keeps a
  `rope_init_fn` whose signature changed (offline.initialise passes the device by keyword).
- LoRA: the script's `LoraConfig(target_modules="all-linear", exclude_modules=[])` reaches more
  under PEFT 0.21. On OLMoE it adds `target_parameters` on the router weight and the fused
  experts (PEFT's ParamWrapper, whose per-forward parametrization makes Dynamo recompile every
  step under every backend; dyngen.thunderfx.compile runs it without that, Note [PEFT ParamWrapper
  on fused experts]). On PhiMoE and GRIN it wraps the router, PhimoeTopKRouter, an nn.Linear
  that returns a tuple, so the first forward fails with "'tuple' object has no attribute
  'dtype'" (Note [transformers 5 PhiMoE router and all-linear]). That is a failure of the script
  itself: a user must add the router to `exclude_modules` in its `setup_lora` (e.g.
  `exclude_modules = ["router"]` for model_type "phimoe"). exclude_router_from_lora makes
  exactly that change, from outside, for every backend alike.
- Nothing else is changed. In particular the benchmark's PhiMoE shims (hf5_shims.apply) are not
  applied, as the pinned generation's run applies none of models.py's: stock ThunderFX fails on
  PhiMoE and GRIN in both generations (on transformers 5 with an AssertionError in Thunder's
  split_into_forward_and_backward, on a graph of the MoE block that takes the router weight),
  and the tables show it.
"""

from __future__ import annotations

import hf5_shims  # bench/moe_peft (run_upstream_peft.py puts it on sys.path)


def exclude_router_from_lora(bp, notes: list[str]) -> None:
    """Note [Upstream benchmark_peft on transformers 5]: the script's get_peft_model call gets
    PhiMoE's router added to its LoraConfig's exclude_modules (nothing on other models); what it
    did goes to `notes`."""
    get_peft_model = bp.get_peft_model

    def get_peft_model_without_router(model, lora_config, *a, **k):
        exclude = hf5_shims.lora_exclude(model)
        if exclude:
            lora_config.exclude_modules = sorted(
                set(lora_config.exclude_modules or ()) | set(exclude)
            )
            notes.append(
                f"LoraConfig.exclude_modules += {exclude} (PhimoeTopKRouter returns a tuple)"
            )
        return get_peft_model(model, lora_config, *a, **k)

    bp.get_peft_model = get_peft_model_without_router
