#include "passes/fusion_util.h"

#include <algorithm>
#include <range/v3/algorithm/contains.hpp>
#include <range/v3/range/conversion.hpp>
#include <range/v3/view/filter.hpp>
#include <range/v3/view/iota.hpp>
#include <stdexcept>

#include "passes/graph_copier.h"

namespace dg {

FusionAssignment::FusionAssignment(const Graph& g) : g_(g), group_(g.nodes.size(), 0) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    group_[i] = fusion_group(g.nodes[i]);
    next_ = std::max(next_, group_[i] + 1);
    if (is_epilogue_matmul(g.nodes[i])) epilogue_matmul_.insert(static_cast<int>(i));
    if (int64_t p = gemm_problem(g.nodes[i]); p >= 0) gemm_problem_[static_cast<int>(i)] = p;
  }
}

std::vector<int> FusionAssignment::members(int64_t group) const {
  std::vector<int> out;
  for (size_t i = 0; i < group_.size(); ++i)
    if (group != 0 && group_[i] == group) out.push_back(static_cast<int>(i));
  return out;
}

int64_t FusionAssignment::create(const std::vector<int>& nodes) {
  int64_t id = next_++;
  for (int n : nodes) group_[n] = id;
  return id;
}

void FusionAssignment::merge(int64_t into, int64_t from) {
  for (int64_t& g : group_)
    if (g == from) g = into;
}

void FusionAssignment::drop_singletons() {
  std::map<int64_t, int> count;
  for (int64_t g : group_)
    if (g) ++count[g];
  for (size_t i = 0; i < group_.size(); ++i)
    if (group_[i] && count[group_[i]] == 1 &&
        op_info(g_.nodes[i].op).category != OpCategory::kMatmul)
      group_[i] = 0;
}

bool FusionAssignment::convex(const std::vector<int>& nodes) const {
  std::set<int> set(nodes.begin(), nodes.end());
  // Forward from the set through non-members; reaching a member again breaks convexity.
  std::vector<bool> reached(g_.nodes.size(), false);
  int first = *std::min_element(nodes.begin(), nodes.end());
  for (size_t i = first; i < g_.nodes.size(); ++i) {
    const Node& n = g_.nodes[i];
    bool from_outside_path = false, from_set = false;
    for (ValueId in : n.inputs) {
      int p = producer_of(g_, in);
      if (p < 0) continue;
      if (set.count(p))
        from_set = true;
      else if (reached[p])
        from_outside_path = true;
    }
    if (set.count(static_cast<int>(i))) {
      if (from_outside_path) return false;
    } else if (from_set || from_outside_path) {
      reached[i] = true;
    }
  }
  return true;
}

Graph FusionAssignment::apply() const {
  const size_t n = g_.nodes.size();
  std::vector<bool> done(n, false);
  std::vector<int> order;
  auto ready = [&](const std::vector<int>& unit) {
    std::set<int> in_unit(unit.begin(), unit.end());
    for (int u : unit)
      for (ValueId v : g_.nodes[u].inputs) {
        int p = producer_of(g_, v);
        if (p >= 0 && !done[p] && !in_unit.count(p)) return false;
      }
    return true;
  };
  while (order.size() < n) {
    bool progressed = false;
    for (size_t i = 0; i < n && !progressed; ++i) {
      if (done[i]) continue;
      std::vector<int> unit =
          group_[i] ? members(group_[i]) : std::vector<int>{static_cast<int>(i)};
      if (!ready(unit)) continue;
      for (int u : unit) {
        done[u] = true;
        order.push_back(u);
      }
      progressed = true;
    }
    if (!progressed) throw std::logic_error("fusion groups are not convex");
  }
  GraphCopier copier(g_);
  for (int i : order) {
    Node node = g_.nodes[i];
    if (group_[i]) node.attrs.set(kFusionAttr, group_[i]);
    if (epilogue_matmul_.count(i)) node.attrs.set(kEpilogueMatmulAttr, int64_t{1});
    if (gemm_problem_of(i) >= 0) node.attrs.set(kGemmProblemAttr, gemm_problem_of(i));
    copier.copy_node(node);
  }
  return copier.finish();
}

std::vector<int> users_of(const Graph& g, ValueId v) {
  auto reads_v = [&](int i) { return ranges::contains(g.nodes[i].inputs, v); };
  return ranges::views::iota(0, static_cast<int>(g.nodes.size())) | ranges::views::filter(reads_v) |
         ranges::to<std::vector>();
}

bool is_elementwise(OpKind op) {
  switch (op_info(op).category) {
    case OpCategory::kCast:
    case OpCategory::kUnary:
    case OpCategory::kBinary:
    case OpCategory::kCompare:
    case OpCategory::kWhere:
      return true;
    default:
      return false;
  }
}

bool is_scalar_constant(const Graph& g, ValueId v) {
  int p = producer_of(g, v);
  return p >= 0 && g.nodes[p].op == OpKind::kConstant && g.tensor(v).rank() == 0;
}

std::vector<int> anchors_of(const Graph& g, const FusionAssignment& fa, int64_t group) {
  std::vector<int> out;
  for (int m : fa.members(group))
    if (op_info(g.nodes[m].op).category == OpCategory::kMatmul && !fa.is_epilogue(m))
      out.push_back(m);
  return out;
}

}  // namespace dg
