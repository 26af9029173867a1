// Shared by the fusion passes (Note [Fusion groups] in ir/fusion.h): group bookkeeping, convexity
// and the node order that keeps each group's members together.
#pragma once
#include <map>
#include <set>
#include <vector>

#include "ir/fusion.h"
#include "ir/graph.h"

namespace dg {

// The fusion groups of a graph as a mutable assignment; apply() writes them back.
class FusionAssignment {
 public:
  explicit FusionAssignment(const Graph& g);

  int64_t group_of(int node) const { return group_[node]; }
  std::vector<int> members(int64_t group) const;
  // A new group holding `nodes` (which must be ungrouped).
  int64_t create(const std::vector<int>& nodes);
  void add(int64_t group, int node) { group_[node] = group; }
  // Moves every member of `from` into `into`.
  void merge(int64_t into, int64_t from);
  void mark_epilogue_matmul(int node) { epilogue_matmul_.insert(node); }
  bool is_epilogue(int node) const { return epilogue_matmul_.count(node) != 0; }
  // The node's problem in a grouped GEMM group (Note [Grouped GEMMs]), -1 when none.
  void set_gemm_problem(int node, int64_t problem) { gemm_problem_[node] = problem; }
  int64_t gemm_problem_of(int node) const {
    auto it = gemm_problem_.find(node);
    return it == gemm_problem_.end() ? -1 : it->second;
  }
  // Removes pointwise groups of a single node (they are no different from no group).
  void drop_singletons();
  // True when `nodes` is convex: no path leaves the set and comes back.
  bool convex(const std::vector<int>& nodes) const;
  // The graph with the groups written as attributes and members made adjacent in node order.
  Graph apply() const;

  const Graph& graph() const { return g_; }

 private:
  const Graph& g_;
  std::vector<int64_t> group_;
  std::set<int> epilogue_matmul_;
  std::map<int, int64_t> gemm_problem_;
  int64_t next_ = 1;
};

// Nodes reading `v`, in node order.
std::vector<int> users_of(const Graph& g, ValueId v);
// The producing node of `v`, or -1 for a graph input.
inline int producer_of(const Graph& g, ValueId v) { return g.value(v).producer; }
bool is_elementwise(OpKind op);
// True for a rank-0 constant node (kernels spell those as literals).
bool is_scalar_constant(const Graph& g, ValueId v);
// The matmul / linear anchors of a group's members (not epilogue matmuls).
std::vector<int> anchors_of(const Graph& g, const FusionAssignment& fa, int64_t group);

}  // namespace dg
