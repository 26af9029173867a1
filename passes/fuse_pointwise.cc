// fuse_pointwise: elementwise ops, casts and broadcasts join the kernel of what they read
// (Note [Fusion groups]), for any graph:
// - epilogue: an elementwise node over the output shape of a GEMM group (no batch dims) or of a
//   pointwise group joins the group that produces one of its operands;
// - otherwise it starts a pointwise group that later consumers over the same shape join;
// - prologue: a cast whose every reader is a GEMM of one group, reading it as its A operand,
//   joins that group (the GEMM converts while it loads its tiles).
// - reductions: a reduction over a pointwise group's shape joins it (the group is evaluated per
//   element inside the reduction's loop), and elementwise nodes over the reduction's output join
//   as its epilogue;
// Operands from outside a group are read with broadcast strides, so broadcasts fuse too; rank-0
// constants stay literals. A join happens only if the group stays convex.
#include <optional>

#include "passes/fusion_util.h"
#include "passes/passes.h"

namespace dg {

namespace {

// The shape every member of group `id` computes over: the anchors' output for a GEMM group.
std::optional<std::vector<SymExpr>> group_shape(const FusionAssignment& fa, int64_t id) {
  const Graph& g = fa.graph();
  std::vector<int> anchors = anchors_of(g, fa, id);
  std::vector<int> members = fa.members(id);
  if (!anchors.empty()) {
    const Node& a = g.nodes[anchors[0]];
    if (a.op == OpKind::kMatmul && g.tensor(a.output).rank() != 2) return std::nullopt;
    return g.tensor(a.output).shape;
  }
  for (int m : members)  // a reduction group computes over the reduction's output
    if (fusable_reduction(g.nodes[m].op)) return g.tensor(g.nodes[m].output).shape;
  for (int m : members)
    if (is_elementwise(g.nodes[m].op)) return g.tensor(g.nodes[m].output).shape;
  return std::nullopt;
}

int reduction_of(const FusionAssignment& fa, int64_t id) {
  for (int m : fa.members(id))
    if (fusable_reduction(fa.graph().nodes[m].op)) return m;
  return -1;
}

// A GEMM a kernel can fuse around: linear, or matmul without batch dims.
bool plain_gemm(const FusionAssignment& fa, int node) {
  const Graph& g = fa.graph();
  const Node& n = g.nodes[node];
  if (op_info(n.op).category != OpCategory::kMatmul || fa.is_epilogue(node)) return false;
  return n.op == OpKind::kLinear || g.tensor(n.output).rank() == 2;
}

// Adds `node` to the group of `owner` (a new group when `owner` is an ungrouped GEMM).
bool try_join(FusionAssignment& fa, int owner, int node) {
  int64_t id = fa.group_of(owner);
  std::vector<int> all = id ? fa.members(id) : std::vector<int>{owner};
  all.push_back(node);
  if (!fa.convex(all)) return false;
  if (id == 0) id = fa.create({owner});
  fa.add(id, node);
  return true;
}

bool fuse_epilogue(FusionAssignment& fa, int node) {
  const Graph& g = fa.graph();
  const Node& n = g.nodes[node];
  if (!is_elementwise(n.op) || fa.group_of(node) != 0) return false;
  const std::vector<SymExpr>& shape = g.tensor(n.output).shape;
  for (ValueId in : n.inputs) {
    int p = producer_of(g, in);
    if (p < 0) continue;
    std::optional<std::vector<SymExpr>> s;
    bool reduction = fusable_reduction(g.nodes[p].op);
    if (fa.group_of(p) != 0) {
      int r = reduction_of(fa, fa.group_of(p));
      if (r >= 0 && p < r) continue;  // a value of the reduction's prologue
      s = group_shape(fa, fa.group_of(p));
    } else if (plain_gemm(fa, p) || reduction) {
      s = g.tensor(g.nodes[p].output).shape;
    }
    if (s && *s == shape && try_join(fa, p, node)) return true;
  }
  return false;
}

bool fuse_prologue(FusionAssignment& fa, int node) {
  const Graph& g = fa.graph();
  const Node& n = g.nodes[node];
  if (n.op != OpKind::kCast || fa.group_of(node) != 0) return false;
  std::vector<int> users = users_of(g, n.output);
  if (users.empty()) return false;
  for (int u : users) {
    const Node& user = g.nodes[u];
    bool as_a = plain_gemm(fa, u) && user.inputs[0] == n.output && user.inputs[1] != n.output;
    if (!as_a || fa.group_of(u) != fa.group_of(users[0])) return false;
    if (fa.group_of(u) == 0 && users.size() > 1) return false;  // two separate GEMM kernels
  }
  for (ValueId o : g.outputs)
    if (o == n.output) return false;
  return try_join(fa, users[0], node);
}

// prologue of a reduction: a reduction over a pointwise group's shape joins that group.
bool fuse_reduction(FusionAssignment& fa, int node) {
  const Graph& g = fa.graph();
  const Node& n = g.nodes[node];
  if (!fusable_reduction(n.op) || fa.group_of(node) != 0) return false;
  int p = producer_of(g, n.inputs[0]);
  if (p < 0 || fa.group_of(p) == 0 || !is_elementwise(g.nodes[p].op)) return false;
  int64_t id = fa.group_of(p);
  if (!anchors_of(g, fa, id).empty() || reduction_of(fa, id) >= 0) return false;
  auto s = group_shape(fa, id);
  return s && *s == g.tensor(n.inputs[0]).shape && try_join(fa, p, node);
}

}  // namespace

Graph fuse_pointwise(const Graph& g) {
  FusionAssignment fa(g);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (fuse_prologue(fa, static_cast<int>(i)) || fuse_epilogue(fa, static_cast<int>(i)) ||
        fuse_reduction(fa, static_cast<int>(i))) {
      changed = true;
    } else if (is_elementwise(n.op) && fa.group_of(i) == 0 && !is_scalar_constant(g, n.output)) {
      fa.create({static_cast<int>(i)});  // a pointwise group others may join
      changed = true;
    }
  }
  fa.drop_singletons();
  return changed ? fa.apply() : g;
}

}  // namespace dg
