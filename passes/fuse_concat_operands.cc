// fuse_concat_operands: a GEMM whose A and B are concatenations along K (concat_gemm_k's
// rewrite, Note [K-concatenated GEMMs]) reads each part in place: the two `cat` nodes, and view
// chains of the parts (ir/strided_view.h), join the GEMM's group, so no copy kernel runs and
// codegen accumulates one K segment after another.
#include "ir/strided_view.h"
#include "passes/fusion_util.h"
#include "passes/passes.h"

namespace dg {

namespace {

bool read_only_by(const Graph& g, ValueId v, int reader) {
  std::vector<int> users = users_of(g, v);
  for (ValueId o : g.outputs)
    if (o == v) return false;
  return users.size() == 1 && users[0] == reader;
}

// The cat node producing operand `operand` of `gemm` along its K dim, if it may join.
int concat_along_k(const FusionAssignment& fa, int gemm, size_t operand) {
  const Graph& g = fa.graph();
  const Node& n = g.nodes[gemm];
  int p = producer_of(g, n.inputs[operand]);
  if (p < 0 || g.nodes[p].op != OpKind::kCat || fa.group_of(p) != 0) return -1;
  if (!read_only_by(g, n.inputs[operand], gemm)) return -1;
  // K is dim 1 of A, dim 0 of a matmul's B [K, N] and dim 1 of a linear's weight [N, K].
  int64_t k_dim = operand == 0 || n.op == OpKind::kLinear ? 1 : 0;
  return g.nodes[p].attrs.get_int("dim") == k_dim ? p : -1;
}

}  // namespace

Graph fuse_concat_operands(const Graph& g) {
  FusionAssignment fa(g);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool gemm = n.op == OpKind::kMatmul || (n.op == OpKind::kLinear && n.inputs.size() == 2);
    if (!gemm || fa.is_epilogue(i) || g.tensor(n.output).rank() != 2) continue;
    int a_cat = concat_along_k(fa, static_cast<int>(i), 0);
    int b_cat = concat_along_k(fa, static_cast<int>(i), 1);
    if (a_cat < 0 || b_cat < 0) continue;
    const Node &ac = g.nodes[a_cat], &bc = g.nodes[b_cat];
    if (ac.inputs.size() != bc.inputs.size()) continue;
    bool same_segments = true;
    int64_t b_k_dim = n.op == OpKind::kLinear ? 1 : 0;
    for (size_t j = 0; j < ac.inputs.size(); ++j)
      same_segments =
          same_segments && g.tensor(ac.inputs[j]).shape[1] == g.tensor(bc.inputs[j]).shape[b_k_dim];
    if (!same_segments) continue;
    int64_t id = fa.group_of(static_cast<int>(i));
    if (id != 0 && anchors_of(g, fa, id).size() != 1) continue;
    std::vector<int> joining = {a_cat, b_cat};
    for (const Node* cat : {&ac, &bc}) {  // parts that are single-use view chains join too
      int cat_index = cat == &ac ? a_cat : b_cat;
      for (ValueId part : cat->inputs) {
        auto view = strided_view_of(g, part);
        if (!view || view->nodes.empty()) continue;
        bool own = true;
        for (size_t k = 0; k < view->nodes.size(); ++k) {
          int reader = k + 1 < view->nodes.size() ? view->nodes[k + 1] : cat_index;
          own = own && fa.group_of(view->nodes[k]) == 0 &&
                read_only_by(g, g.nodes[view->nodes[k]].output, reader);
        }
        if (own) joining.insert(joining.end(), view->nodes.begin(), view->nodes.end());
      }
    }
    std::vector<int> all = id ? fa.members(id) : std::vector<int>{static_cast<int>(i)};
    all.insert(all.end(), joining.begin(), joining.end());
    if (!fa.convex(all)) continue;
    if (id == 0) id = fa.create({static_cast<int>(i)});
    for (int m : joining) fa.add(id, m);
    changed = true;
  }
  return changed ? fa.apply() : g;
}

}  // namespace dg
