// Lowering of a grouped GEMM group (Note [Grouped GEMMs] in passes/group_independent_gemms.cc):
// each problem's members are a GEMM group of their own; one kernel runs them all, problem p on
// blockIdx.z == p, when they lower to the same kernel shape.
#include <map>
#include <stdexcept>

#include "codegen/group.h"
#include "ir/fusion.h"

namespace dg {

namespace {

struct Problem {
  std::vector<int> order;  // members in node order
  std::set<int> members;
  std::vector<int> anchors;
};

std::vector<Problem> split_problems(const Graph& g, const std::vector<int>& members) {
  std::map<int64_t, Problem> by_index;
  for (int m : members) {
    int64_t p = gemm_problem(g.nodes[m]);
    if (p < 0) throw std::logic_error("a grouped GEMM member without a problem");
    by_index[p].order.push_back(m);
    by_index[p].members.insert(m);
  }
  std::vector<Problem> problems;
  for (auto& [index, problem] : by_index) {
    if (index != static_cast<int64_t>(problems.size()))
      throw std::logic_error("grouped GEMM problems are not numbered 0, 1, ...");
    problem.anchors = group_anchors(g, problem.order);
    if (problem.anchors.empty() || problem.anchors.size() > 2)
      throw std::logic_error("a grouped GEMM problem needs one or two GEMMs");
    problems.push_back(std::move(problem));
  }
  return problems;
}

}  // namespace

void emit_grouped_gemm_group(LoweringContext& ctx, const std::vector<int>& members) {
  std::vector<Problem> problems = split_problems(ctx.graph(), members);
  // One parameter list for the kernel: each problem's epilogue adds its buffers to it in turn.
  KernelParams params;
  std::vector<GemmKernelSpec> specs;
  for (const Problem& p : problems)
    specs.push_back(gemm_group_spec(ctx, p.order, p.members, p.anchors, params));
  if (gemms_share_a_kernel(specs)) return emit_grouped_gemm(ctx, specs, std::move(params));
  // Problems on different tiles (say one B read transposed, so on other tensor-core layouts):
  // a kernel each, as without the grouping; the summary says why there is more than one.
  for (const Problem& p : problems) {
    KernelParams own;
    GemmKernelSpec spec = gemm_group_spec(ctx, p.order, p.members, p.anchors, own);
    spec.params = std::move(own);
    spec.summary += " (grouped GEMM problem on a tile of its own)";
    emit_gemm(ctx, std::move(spec));
  }
}

}  // namespace dg
