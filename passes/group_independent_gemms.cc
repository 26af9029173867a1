// group_independent_gemms: GEMM groups that could run side by side become one launch.
//
// Note [Grouped GEMMs]
// GEMM groups (Note [Fusion groups]) with the same M, N and K, the same operand and output dtypes
// and the same number of B operands, none of which depends on another (no path between them,
// through any node), merge into one group whose members carry `gemm_problem = P`: one kernel with
// the problems on blockIdx.z, M tiles on blockIdx.x and N tiles on blockIdx.y as for one GEMM
// (Note [Grid limits]). A block runs the one mainloop on its problem's operand pointers (offsets,
// leading dimensions), then its problem's epilogue. Each problem keeps its own operands, prologue,
// epilogue and outputs, and computes exactly what its own kernel computed (same tile, same
// accumulation order, same rounding points, no atomics): grouping saves launches, and for small
// GEMMs (LoRA's rank-r products in an expert's backward, a few tiles each) it fills more of the
// GPU per launch. M is compared as a symbolic expression, so the grouping holds for every binding
// of the symbols.
// Codegen (codegen/emit_grouped_gemm.cc) takes the group as one kernel when every problem lowers
// to the same kernel shape (the same tile, operand layouts and, on the scalar tile, strides:
// gemms_share_a_kernel); otherwise it emits one kernel per problem and says so in their summaries.
// GEMM nodes that no fusion pass grouped take part as groups of one. Not grouped: weight-gradient
// groups, GEMMs over K segments (a `cat` member), batched matmuls.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>

#include "passes/fusion_util.h"
#include "passes/passes.h"

namespace dg {

namespace {

// Each problem's epilogue is its own code in the kernel, and its operands one more selection.
constexpr size_t kMaxProblems = 8;

// What must agree for two GEMM groups to share one launch.
struct GemmSignature {
  OpKind op;
  size_t anchors, arity;
  SymExpr M, N, K;
  DType a, a_load, b, b_load, out;
  bool operator==(const GemmSignature& o) const {
    return op == o.op && anchors == o.anchors && arity == o.arity && M == o.M && N == o.N &&
           K == o.K && a == o.a && a_load == o.a_load && b == o.b && b_load == o.b_load &&
           out == o.out;
  }
};

// A GEMM group, or a GEMM node no pass grouped (lowered as a group of one all the same).
struct Candidate {
  int64_t group;  // 0 for a lone GEMM node
  std::vector<int> members;
  GemmSignature signature;
};

// The dtype a GEMM operand is loaded as: the input of a cast prologue in the group, else its own.
DType load_dtype(const Graph& g, const std::set<int>& members, ValueId v) {
  int p = producer_of(g, v);
  if (p >= 0 && members.count(p) && g.nodes[p].op == OpKind::kCast)
    return g.tensor(g.nodes[p].inputs[0]).dtype;
  return g.tensor(v).dtype;
}

// The signature of a GEMM group (or lone GEMM node) that may be grouped, or nothing.
std::optional<GemmSignature> signature(const FusionAssignment& fa,
                                       const std::vector<int>& members) {
  const Graph& g = fa.graph();
  std::vector<int> anchors;
  for (int m : members) {
    const Node& n = g.nodes[m];
    if (is_wgrad_member(n) || fa.gemm_problem_of(m) >= 0 || n.op == OpKind::kCat) return {};
    if (op_info(n.op).category == OpCategory::kMatmul && !fa.is_epilogue(m)) anchors.push_back(m);
  }
  if (anchors.empty() || anchors.size() > 2) return {};
  const std::set<int> set(members.begin(), members.end());
  const Node& n = g.nodes[anchors[0]];
  const TensorType &a = g.tensor(n.inputs[0]), &b = g.tensor(n.inputs[1]);
  const TensorType& out = g.tensor(n.output);
  if (b.rank() != 2 || out.rank() < 2) return {};
  GemmSignature s{n.op,
                  anchors.size(),
                  n.inputs.size(),
                  SymExpr(0),
                  SymExpr(0),
                  a.shape.back(),
                  a.dtype,
                  load_dtype(g, set, n.inputs[0]),
                  b.dtype,
                  load_dtype(g, set, n.inputs[1]),
                  out.dtype};
  if (n.op == OpKind::kLinear) {
    std::vector<SymExpr> rows(out.shape.begin(), out.shape.end() - 1);
    s.M = TensorType{out.dtype, rows}.numel();
    s.N = b.shape[0];
  } else {
    if (a.rank() != 2) return {};
    s.M = a.shape[0];
    s.N = b.shape[1];
  }
  return s;
}

// For each candidate, the candidates it depends on (a path from one of their members to one of
// its members), as bitsets: one pass over the nodes in order, so large graphs with many GEMMs of
// one shape stay cheap.
std::vector<std::vector<uint64_t>> candidate_ancestors(const Graph& g,
                                                       const std::vector<Candidate>& candidates) {
  const size_t words = (candidates.size() + 63) / 64;
  std::vector<int> candidate_of(g.nodes.size(), -1);
  for (size_t c = 0; c < candidates.size(); ++c)
    for (int m : candidates[c].members) candidate_of[m] = static_cast<int>(c);
  // reached[i]: the candidates with a member that is node i or one of its ancestors.
  std::vector<std::vector<uint64_t>> reached(g.nodes.size(), std::vector<uint64_t>(words, 0));
  std::vector<std::vector<uint64_t>> ancestors(candidates.size(), std::vector<uint64_t>(words, 0));
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (ValueId in : g.nodes[i].inputs) {
      int p = producer_of(g, in);
      if (p < 0) continue;
      for (size_t w = 0; w < words; ++w) reached[i][w] |= reached[p][w];
    }
    if (int c = candidate_of[i]; c >= 0) {
      for (size_t w = 0; w < words; ++w) ancestors[c][w] |= reached[i][w];
      reached[i][c / 64] |= uint64_t{1} << (c % 64);
    }
  }
  return ancestors;
}

bool has(const std::vector<uint64_t>& bits, size_t c) { return (bits[c / 64] >> (c % 64)) & 1; }

}  // namespace

Graph group_independent_gemms(const Graph& g) {
  FusionAssignment fa(g);
  // Candidates in node order of their first member.
  std::vector<Candidate> candidates;
  std::set<int64_t> seen;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    int64_t id = fa.group_of(static_cast<int>(i));
    if (id != 0 && !seen.insert(id).second) continue;
    bool lone_gemm = id == 0 && op_info(g.nodes[i].op).category == OpCategory::kMatmul;
    if (id == 0 && !lone_gemm) continue;
    std::vector<int> members = id ? fa.members(id) : std::vector<int>{static_cast<int>(i)};
    if (std::optional<GemmSignature> s = signature(fa, members))
      candidates.push_back({id, std::move(members), *s});
  }
  if (candidates.size() < 2) return g;
  const std::vector<std::vector<uint64_t>> ancestors = candidate_ancestors(g, candidates);
  // No path between any two problems: then none between the merged group and itself either.
  auto independent = [&](size_t c, size_t d) {
    return !has(ancestors[c], d) && !has(ancestors[d], c);
  };
  std::vector<bool> taken(candidates.size(), false);
  bool changed = false;
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (taken[c]) continue;
    std::vector<size_t> problems = {c};
    for (size_t d = c + 1; d < candidates.size() && problems.size() < kMaxProblems; ++d) {
      if (taken[d] || !(candidates[d].signature == candidates[c].signature)) continue;
      bool free = true;
      for (size_t p : problems) free = free && independent(p, d);
      if (!free) continue;
      taken[d] = true;
      problems.push_back(d);
    }
    if (problems.size() < 2) continue;
    int64_t id = candidates[c].group ? candidates[c].group : fa.create(candidates[c].members);
    for (size_t p = 0; p < problems.size(); ++p) {
      for (int m : candidates[problems[p]].members) {
        fa.add(id, m);
        fa.set_gemm_problem(m, static_cast<int64_t>(p));
      }
    }
    changed = true;
  }
  return changed ? fa.apply() : g;
}

}  // namespace dg
