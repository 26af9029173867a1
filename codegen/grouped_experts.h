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

// A grouped_mm node's operands: a[R, K], the offsets, and E weights, one fused [E, ...] parameter
// or E separate ones, each [N, K] ("nk") or [K, N] ("kn").
struct GroupedMmShape {
  const Node& node;
  DType dtype;
  int64_t experts;
  bool fused, kn;
  SymExpr R, N, K;
};
GroupedMmShape grouped_mm_shape(const Graph& g, const Node& node);

// Note [Grouped wgmma tile] in codegen/device/dg_grouped_sm90.cuh: whether the sm_90a kernel
// takes the problem, and its kernel (variant 0 of the node's kernels, `name`; the mma.sync
// grouped kernel follows as its fallback). codegen/emit_grouped_wgmma.cc.
bool grouped_mm_on_wgmma(const GroupedMmShape& p, const CodegenOptions& options);
void emit_grouped_mm_wgmma(LoweringContext& ctx, const GroupedMmShape& p, const std::string& name);

}  // namespace dg
