// Internal: lowering of fusion groups (Note [Fusion groups] in ir/fusion.h).
#pragma once
#include <set>
#include <vector>

#include "codegen/lowering.h"

namespace dg {

// True when something outside `members` (or the graph's output list) reads `v`.
bool escapes(const Graph& g, const std::set<int>& members, ValueId v);
// The GEMM nodes of a group (matmul / linear not marked epilogue_matmul), in node order.
std::vector<int> group_anchors(const Graph& g, const std::vector<int>& members);
// Emits the group's one kernel. `members` are node indices in topological order; buffers of the
// values that escape the group are assigned already.
void emit_group(LoweringContext& ctx, const std::vector<int>& members);

}  // namespace dg
