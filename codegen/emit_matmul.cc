// Lowering of an unfused linear / matmul node: a GEMM group of one (codegen/emit_group.cc), so it
// runs on tensor cores when its operands allow (Note [Tensor-core GEMM]) and on the scalar tile
// otherwise (Note [Simple GEMM] in emit_gemm.cc).
#include "codegen/group.h"

namespace dg {

void emit_matmul_node(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  emit_group(ctx, {static_cast<int>(&node - g.nodes.data())});
}

}  // namespace dg
