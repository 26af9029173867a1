// Internal: lowering of weight-gradient groups (Note [Weight-gradient groups] in
// passes/split_weight_grads.cc).
#pragma once
#include <vector>

#include "codegen/lowering.h"
#include "ir/fusion.h"

namespace dg {

// Emits the group's two kernels (partial products over token chunks, then their reduction in
// chunk order). `members` are node indices in topological order; the buffers of the values that
// leave the group are assigned already.
void emit_wgrad_group(LoweringContext& ctx, const std::vector<int>& members);

}  // namespace dg
