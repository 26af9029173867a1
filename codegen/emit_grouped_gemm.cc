// Lowering of a grouped GEMM group (Note [Grouped GEMMs] in passes/group_independent_gemms.cc):
// each problem's members are a GEMM group of their own; one kernel runs them all, problem p on
// blockIdx.z == p, when they lower to the same kernel shape (on tensor cores, on the scalar tile or
// as rank-r split-K kernels), and a kernel each otherwise.
#include <algorithm>
#include <map>
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/gemm.h"
#include "codegen/gemm_snippets.h"
#include "codegen/group.h"
#include "codegen/mma_sync_snippets.h"
#include "codegen/rank_gemm.h"
#include "codegen/scalar_gemm.h"
#include "codegen/tc_layout.h"
#include "ir/fusion.h"

namespace dg {

namespace {

// The kernel a spec lowers to, as text: the tile (kind and size), M, N and K, and what the shared
// mainloop spells into its code (the operands' dtypes and, on the scalar tile, their strides;
// the tensor-core mainloop takes its leading dimensions at run time). Empty when the spec cannot
// be one problem of a grouped kernel (K segments, batch dims).
std::string grouping_key(const GemmKernelSpec& spec) {
  if (!spec.k_segments.empty() || !spec.batch.empty()) return "";
  std::string key = " nb=" + std::to_string(spec.b.size()) + " M=" + spec.M.to_string() +
                    " N=" + spec.N.to_string() + " K=" + spec.K.to_string();
  if (tensor_core_eligible(spec)) {
    std::string tiles;
    for (const TileVariant& v :
         tile_variants(spec.M, *spec.N.as_const(), static_cast<int>(spec.b.size())))
      tiles += tile_template(v.tile) + " ";
    return "tc " + tiles + (tc_layout(spec.a, spec.M, spec.K, false)->transposed ? " AT" : "") +
           (tc_layout(spec.b[0], spec.K, spec.N, true)->transposed ? " BKN" : "") + key;
  }
  key = "scalar " + compute_ctype(spec.acc_dtype) + key;
  std::vector<const GemmOperandRef*> operands = {&spec.a};
  for (const GemmOperandRef& b : spec.b) operands.push_back(&b);
  for (const GemmOperandRef* op : operands)
    key += " " + ctype(op->load_dtype) + ">" + ctype(op->value_dtype) + "(" +
           op->row_stride.to_string() + ", " + op->col_stride.to_string() + ")";
  return key;
}

// True when the problems lower to the same kernel shape (the same tile kind and size, the same
// operand layouts, M, N and K; no K segments, no batch), so one launch can run them all.
bool gemms_share_a_kernel(const std::vector<GemmKernelSpec>& problems) {
  if (problems.empty()) return false;
  const std::string key = grouping_key(problems[0]);
  for (const GemmKernelSpec& p : problems)
    if (key.empty() || grouping_key(p) != key) return false;
  return true;
}

// "linear%3 add%4": the nodes' ops and their outputs, for the summary.
std::string node_list(const Graph& g, const std::vector<int>& nodes) {
  std::string s;
  for (int i : nodes)
    s += (s.empty() ? "" : " ") + std::string(op_name(g.nodes[i].op)) + "%" +
         std::to_string(g.nodes[i].output);
  return s;
}

// A grouped kernel on tensor cores: one mainloop over the block's problem's operands, then that
// problem's epilogue.
std::string grouped_tc_source(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                              KernelParams& params, const std::string& name, const TileConfig& t) {
  const GemmKernelSpec& first = problems[0];
  const std::string nb = std::to_string(first.b.size());
  const bool at = tc_layout(first.a, first.M, first.K, false)->transposed;
  const bool bkn = tc_layout(first.b[0], first.K, first.N, true)->transposed;
  std::vector<std::string> a, lda, ldb, epilogues;
  std::vector<std::vector<std::string>> b(first.b.size());
  std::string lambdas, scratch;
  bool has_scratch = false;
  const std::string tile_args = tc_tile_args(at, bkn, static_cast<int>(first.b.size()));
  for (size_t p = 0; p < problems.size(); ++p) {
    const GemmKernelSpec& spec = problems[p];
    a.push_back(params.add_checked(spec.a.buffer, DType::kBF16, spec.a.offset));
    lda.push_back(c_expr(tc_layout(spec.a, spec.M, spec.K, false)->ld));
    ldb.push_back(c_expr(tc_layout(spec.b[0], spec.K, spec.N, true)->ld));
    for (size_t j = 0; j < spec.b.size(); ++j)
      b[j].push_back(params.add_checked(spec.b[j].buffer, DType::kBF16, spec.b[j].offset));
    // Each problem stages its own products from the scratch's start: a block runs one problem.
    const auto staged = rank_staging(spec.products, t, at, bkn, static_cast<int>(spec.b.size()));
    if (staged) scratch += scratch_fits(spec.products, *staged, tile_args);
    if (staged && !has_scratch) scratch += scratch_pointer(tile_args);
    has_scratch = has_scratch || staged;
    const std::string epi = "epi" + std::to_string(p);
    lambdas += epilogue_lambda(spec, "float", epi, staged.has_value());
    epilogues.push_back((staged ? rank_staging_code(spec.products, *staged) : "") +
                        // No fallback kernel here: a grouped GEMM takes any address itself.
                        epilogue_call(spec, params, staged.has_value(), epi, false));
  }
  std::string bs;
  for (const std::vector<std::string>& bj : b) bs += (bs.empty() ? "" : ", ") + by_problem(bj);
  return kernel_header(name, t.threads(), params, ctx) + "  typedef " + tile_template(t) +
         " Tile;\n  const unsigned problem = blockIdx.z;\n" +
         "  const long long M = " + c_expr(first.M) + ", N = " + c_expr(first.N) + ";\n" +
         "  const long long c_base = 0;\n" + scratch + lambdas + tc_block_setup(nb) +
         tc_mainloop(nb, at, bkn, by_problem(a), by_problem(lda), bs, by_problem(ldb),
                     c_expr(first.K), false) +
         tc_sum_slices(nb, tile_args) + branch_by_problem(epilogues) + "}\n";
}

// A grouped kernel on the scalar tile: one K loop over the block's problem's operands (the
// problems share strides and dtypes), then that problem's epilogue and stores.
std::string grouped_scalar_source(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                                  KernelParams& params, const std::string& name) {
  const GemmKernelSpec& first = problems[0];
  std::vector<std::string> a, a_base, stores;
  std::vector<std::vector<std::string>> b(first.b.size()), b_base(first.b.size());
  for (const GemmKernelSpec& spec : problems) {
    a.push_back(params.add(spec.a.buffer, spec.a.load_dtype, false));
    a_base.push_back(c_expr(spec.a.offset));
    for (size_t j = 0; j < spec.b.size(); ++j) {
      b[j].push_back(params.add(spec.b[j].buffer, spec.b[j].load_dtype, false));
      b_base[j].push_back(c_expr(spec.b[j].offset));
    }
    stores.push_back(scalar_stores(spec));
  }
  std::string pointers = "  const unsigned problem = blockIdx.z;\n  const " +
                         ctype(first.a.load_dtype) + "* const a_ptr = " + by_problem(a) + ";\n";
  ScalarOperands ops{"a_ptr", by_problem(a_base), {}, {}};
  for (size_t j = 0; j < b.size(); ++j) {
    const std::string J = std::to_string(j);
    pointers += "  const " + ctype(first.b[j].load_dtype) + "* const b_ptr" + J + " = " +
                by_problem(b[j]) + ";\n";
    ops.b.push_back("b_ptr" + J);
    ops.b_base.push_back(by_problem(b_base[j]));
  }
  return kernel_header(name, 256, params, ctx) + pointers +
         scalar_body(first, ops, branch_by_problem(stores), params) + "}\n";
}

// One kernel for all the problems, problem p on blockIdx.z == p (Note [Grouped GEMMs] in
// passes/group_independent_gemms.cc); `params` holds every problem's epilogue buffers (their own
// `params` are not read), A and B are added here. Needs gemms_share_a_kernel(problems).
void emit_grouped_gemm(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                       KernelParams params) {
  if (!gemms_share_a_kernel(problems)) throw std::logic_error("GEMMs that cannot share a kernel");
  const GemmKernelSpec& first = problems[0];
  const bool tc = tensor_core_eligible(first);
  if (!tc && std::all_of(problems.begin(), problems.end(), rank_gemm_eligible))
    return emit_rank_gemm(ctx, problems, std::move(params));
  // The scalar tile (Note [Simple GEMM]) is one variant for every M.
  const std::vector<TileVariant> variants =
      tc ? tile_variants(first.M, *first.N.as_const(), static_cast<int>(first.b.size()))
         : std::vector<TileVariant>{{{64, 64, 16, 0, 0, 0}, 0, Interval::kPosInf}};
  std::string summary;
  std::vector<int> nodes;
  for (const GemmKernelSpec& spec : problems) {
    nodes.insert(nodes.end(), spec.nodes.begin(), spec.nodes.end());
    summary += " {" + node_list(ctx.graph(), spec.nodes) + "}";
  }
  const std::string base = ctx.kernel_name("grouped_" + first.what);
  const SymExpr count(static_cast<int64_t>(problems.size()));
  for (size_t v = 0; v < variants.size(); ++v) {
    const TileConfig& t = variants[v].tile;
    // Problem p on blockIdx.z == p.
    KernelLaunch launch =
        variant_launch(base, variants, v, first.M, first.N, count, tc ? t.threads() : 256);
    launch.nodes = nodes;
    launch.summary = std::to_string(problems.size()) + " problems on blockIdx.z:" + summary +
                     " M=" + first.M.to_string() + " N=" + first.N.to_string() +
                     " K=" + first.K.to_string() + " " + (tc ? tc_tag(t) : "[scalar tile 64x64") +
                     range_tag(variants, v) + "]";
    KernelParams kernel_params = params;
    std::string src = tc ? grouped_tc_source(ctx, problems, kernel_params, launch.name, t)
                         : grouped_scalar_source(ctx, problems, kernel_params, launch.name);
    launch.buffers = kernel_params.buffers();
    launch.checked_operands = kernel_params.checked_operands();
    ctx.add_kernel(std::move(launch), src);
  }
}

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
