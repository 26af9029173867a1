// Internal: the emitters of the grouped-experts ops (Note [Grouped experts ops] in
// ir/shape_infer_grouped.cc), which emit_grouped_experts_node (lowering.h) dispatches to.
#pragma once
#include "codegen/lowering.h"

namespace dg {

// expert_offsets / expert_order: the counting sort (codegen/emit_moe_route.cc).
void emit_moe_route(LoweringContext& ctx, const Node& node);
// grouped_mm and grouped_mm_wgrad (codegen/emit_grouped_mm.cc).
void emit_grouped_mm(LoweringContext& ctx, const Node& node);
void emit_grouped_mm_wgrad(LoweringContext& ctx, const Node& node);
// Whether `node` is a grouped_mm whose kernel runs the tensor-core main loop.
bool grouped_mm_on_tensor_cores(const Graph& g, const Node& node);

}  // namespace dg
