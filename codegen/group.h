// Internal: lowering of fusion groups (Note [Fusion groups] in ir/fusion.h).
#pragma once
#include <set>
#include <vector>

#include "codegen/gemm.h"
#include "codegen/lowering.h"

namespace dg {

// True when something outside `members` (or the graph's output list) reads `v`.
bool escapes(const Graph& g, const std::set<int>& members, ValueId v);
// The GEMM nodes of a group (matmul / linear not marked epilogue_matmul), in node order.
std::vector<int> group_anchors(const Graph& g, const std::vector<int>& members);
// Emits the group's one kernel. `members` are node indices in topological order; buffers of the
// values that escape the group are assigned already.
void emit_group(LoweringContext& ctx, const std::vector<int>& members);

// The GEMM of a GEMM group (`order`: its members in node order, `anchors`: its GEMM nodes) with
// its epilogue; the epilogue's buffers go to `params`, A and B are added when it is emitted.
GemmKernelSpec gemm_group_spec(LoweringContext& ctx, const std::vector<int>& order,
                               const std::set<int>& members, const std::vector<int>& anchors,
                               KernelParams& params);
// A grouped GEMM group (Note [Grouped GEMMs] in passes/group_independent_gemms.cc).
void emit_grouped_gemm_group(LoweringContext& ctx, const std::vector<int>& members);

}  // namespace dg
