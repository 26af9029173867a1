// fuse_epilogue_producers: work whose results only one GEMM group's epilogue reads moves into
// that epilogue (Note [Fusion groups]), for any graph. Two kinds of producers qualify:
// - elementwise work over the GEMM's output shape reading only buffers (in an expert's backward,
//   silu(gate) recomputed for the SwiGLU backward), as an ungrouped node or a pointwise group;
// - a rank-r GEMM group: one bias-free matmul / linear with a static K of at most kMaxRank whose
//   operands are buffers, plus its elementwise epilogue, over the GEMM's output shape (the LoRA
//   update B(t) of a backward's input gradients, `cast(t @ lora_a)`): the matmul becomes an
//   epilogue matmul, evaluated per output element.
// The merge happens only when the merged group stays convex and no producer value is a graph
// output or read elsewhere, so the producer's kernel and its buffers disappear.
#include <map>
#include <set>

#include "ir/fusion.h"
#include "passes/fusion_util.h"
#include "passes/passes.h"

namespace dg {

namespace {

constexpr int64_t kMaxRank = 128;  // the epilogue's rank-r loop runs per output element

bool is_output(const Graph& g, ValueId v) {
  for (ValueId o : g.outputs)
    if (o == v) return true;
  return false;
}

// The GEMM group whose epilogue alone reads every value of `unit` that leaves it; 0 if none.
int64_t sole_epilogue_reader(const FusionAssignment& fa, const std::vector<int>& unit) {
  const Graph& g = fa.graph();
  std::set<int> in_unit(unit.begin(), unit.end());
  int64_t reader = 0;
  for (int m : unit) {
    ValueId v = g.nodes[m].output;
    for (int u : users_of(g, v)) {
      if (in_unit.count(u)) continue;
      int64_t id = fa.group_of(u);
      const Node& user = g.nodes[u];
      bool epilogue_read = id != 0 && is_elementwise(user.op) && !is_wgrad_member(user) &&
                           !anchors_of(g, fa, id).empty();
      if (!epilogue_read || (reader != 0 && reader != id) || is_output(g, v)) return 0;
      reader = id;
    }
    if (is_output(g, v)) return 0;
  }
  return reader;
}

// True when `unit` may run inside an epilogue over `shape`: elementwise nodes over that shape,
// at most one rank-r matmul whose operands come from outside the unit.
bool fits_epilogue(const FusionAssignment& fa, const std::vector<int>& unit,
                   const std::vector<SymExpr>& shape, int* rank_r) {
  const Graph& g = fa.graph();
  std::set<int> in_unit(unit.begin(), unit.end());
  *rank_r = -1;
  for (int m : unit) {
    const Node& n = g.nodes[m];
    if (g.tensor(n.output).shape != shape || is_wgrad_member(n)) return false;
    if (is_elementwise(n.op)) continue;
    bool gemm = n.op == OpKind::kMatmul || (n.op == OpKind::kLinear && n.inputs.size() == 2);
    if (!gemm || *rank_r >= 0 || fa.is_epilogue(m)) return false;
    const TensorType &t = g.tensor(n.inputs[0]), &w = g.tensor(n.inputs[1]);
    auto k = t.shape.back().as_const();
    if (t.rank() != 2 || w.rank() != 2 || !k || *k > kMaxRank) return false;
    for (ValueId in : n.inputs)
      if (in_unit.count(g.value(in).producer)) return false;  // operands must be buffers
    *rank_r = m;
  }
  return true;
}

}  // namespace

Graph fuse_epilogue_producers(const Graph& g) {
  FusionAssignment fa(g);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    int64_t own = fa.group_of(static_cast<int>(i));
    std::vector<int> unit;
    if (own == 0) {
      if (!is_elementwise(n.op) || is_scalar_constant(g, n.output)) continue;
      unit = {static_cast<int>(i)};
    } else {
      unit = fa.members(own);
      if (unit.back() != static_cast<int>(i)) continue;  // look at each group once
      if (anchors_of(g, fa, own).size() > 1) continue;
    }
    int64_t target = sole_epilogue_reader(fa, unit);
    if (target == 0 || target == own) continue;
    std::vector<int> anchors = anchors_of(g, fa, target);
    const std::vector<SymExpr>& shape = g.tensor(g.nodes[anchors[0]].output).shape;
    int rank_r;
    if (shape.size() != 2 || !fits_epilogue(fa, unit, shape, &rank_r)) continue;
    if (own != 0 && rank_r < 0 && !anchors_of(g, fa, own).empty()) continue;
    std::vector<int> merged = fa.members(target);
    merged.insert(merged.end(), unit.begin(), unit.end());
    if (!fa.convex(merged)) continue;
    for (int m : unit) fa.add(target, m);
    if (rank_r >= 0) fa.mark_epilogue_matmul(rank_r);
    changed = true;
  }
  return changed ? fa.apply() : g;
}

}  // namespace dg
