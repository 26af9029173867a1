// fuse_operand_views: a GEMM operand that is a view of a buffer (reshape / permute / slice /
// expand chains, e.g. DBRX's `w1.view(n_experts, ffn, -1)[e].t()`) is read in place through
// strides: the view nodes join the GEMM's group and no copy kernel runs (Note [Fusion groups]).
// Only chains that ir/strided_view.h can write as strides, whose nodes nothing else reads.
#include "ir/strided_view.h"
#include "passes/fusion_util.h"
#include "passes/passes.h"

namespace dg {

namespace {

bool fold_operand(FusionAssignment& fa, int gemm, size_t operand) {
  const Graph& g = fa.graph();
  ValueId v = g.nodes[gemm].inputs[operand];
  auto view = strided_view_of(g, v);
  if (!view || view->nodes.empty()) return false;
  std::vector<int> chain = view->nodes;
  for (size_t k = 0; k < chain.size(); ++k) {
    if (fa.group_of(chain[k]) != 0) return false;
    int reader = k + 1 < chain.size() ? chain[k + 1] : gemm;
    std::vector<int> users = users_of(g, g.nodes[chain[k]].output);
    if (users.size() != 1 || users[0] != reader) return false;
    for (ValueId o : g.outputs)
      if (o == g.nodes[chain[k]].output) return false;
  }
  if (g.nodes[gemm].op == OpKind::kLinear && operand == 0 && view->shape.size() > 2)
    return false;  // a linear's x must fold its leading dims; keep the simple case
  int64_t id = fa.group_of(gemm);
  if (id == 0) id = fa.create({gemm});
  std::vector<int> all = fa.members(id);
  all.insert(all.end(), chain.begin(), chain.end());
  if (!fa.convex(all)) return false;
  for (int n : chain) fa.add(id, n);
  return true;
}

}  // namespace

Graph fuse_operand_views(const Graph& g) {
  FusionAssignment fa(g);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (op_info(n.op).category != OpCategory::kMatmul || fa.is_epilogue(i)) continue;
    if (n.op == OpKind::kMatmul && g.tensor(n.output).rank() != 2) continue;  // batched
    for (size_t operand = 0; operand < 2; ++operand)
      changed |= fold_operand(fa, static_cast<int>(i), operand);
  }
  return changed ? fa.apply() : g;
}

}  // namespace dg
