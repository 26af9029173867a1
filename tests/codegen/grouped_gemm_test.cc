// Grouped GEMM kernels (Note [Grouped GEMMs] in passes/group_independent_gemms.cc): independent
// GEMMs with the same M, N and K run as one launch, a problem per blockIdx.z, on tensor cores and
// on the scalar tile, each problem with its own operands (other offsets and leading dimensions
// too) and epilogue; problems that lower to different tiles get a kernel each. Every case runs
// under host emulation against the reference evaluator on the same graph.
#include <gtest/gtest.h>

#include "codegen/emit_cuda.h"
#include "ir/text_format.h"
#include "passes/pipeline.h"
#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "tests/common/fixtures.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

Graph parse(const std::string& text) { return testing::parse_or_fail(text); }

std::string listing(const KernelPlan& plan) {
  std::string s;
  for (const KernelLaunch& k : plan.kernels) s += k.name + ": " + k.summary + "\n";
  return s;
}

void expect_matches_reference(const Graph& g, const std::set<std::string>& disabled_passes) {
  CompileRequest req;
  req.target = "host";
  req.cache_dir = testing::shared_cache_dir("dyngen-grouped-gemm-cache");
  req.disabled_passes = disabled_passes;
  CompileOutcome o = compile_graph(g, req);
  ASSERT_TRUE(o.ok()) << o.error;
  for (int64_t n : {0, 1, 37, 130}) {
    // At the tensor's scale: an f32 output of a bf16 result (z2 below) moves by that result's last
    // bit where its f32 sum lands near a rounding boundary, and the small-M tile sums K in
    // another order than the reference (Note [Sliced K] in codegen/device/dg_gemm_tile_sm80.cuh).
    testing::expect_matches_reference_at(g, *o.executable, "n", n, 40 + n,
                                         ToleranceMode::kTensorScale);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Two bf16 linears with their own inputs (one a column slice of a wider tensor: another offset
// and leading dimension) and their own epilogues.
TEST(GroupedGemm, TensorCoreProblemsShareOneKernel) {
  Graph g = parse(R"(graph @independent_linears
sym n in [0, inf] div 1
input %x1: bf16[n, 64]
input %x2: bf16[n, 128]
input %w1: bf16[48, 64]
input %w2: bf16[48, 64]
%x2s: bf16[n, 64] = slice(%x2) {dim = 1, end = [128], start = [64]}
%y1: bf16[n, 48] = linear(%x1, %w1)
%y2: bf16[n, 48] = linear(%x2s, %w2)
%z1: bf16[n, 48] = silu(%y1)
%half: f32[] = constant() {dtype = f32, value = 0.5}
%y2f: f32[n, 48] = cast(%y2) {dtype = f32}
%z2: f32[n, 48] = mul(%y2f, %half)
output %z1, %z2
)");
  KernelPlan plan = emit_cuda(run_pipeline(g));
  ASSERT_EQ(launch_sites(plan), 1u) << listing(plan);  // with its tile variants
  const KernelLaunch& k = plan.kernels[0];
  EXPECT_NE(k.summary.find("2 problems on blockIdx.z"), std::string::npos) << k.summary;
  EXPECT_NE(k.summary.find("[tensor cores"), std::string::npos) << k.summary;
  EXPECT_EQ(k.grid[2], SymExpr(2) * k.runs);  // 2 problems when this tile variant runs
  expect_matches_reference(g, {});
}

// The rank-r products of two column slices of one f32 tensor (other A offsets), with their own
// epilogues, on the scalar tile.
TEST(GroupedGemm, ScalarTileProblemsShareOneKernel) {
  Graph g = parse(R"(graph @independent_rank_r
sym n in [0, inf] div 1
input %x: f32[n, 64]
input %a1: f32[32, 4]
input %a2: f32[32, 4]
%s1: f32[n, 32] = slice(%x) {dim = 1, end = [32], start = [0]}
%s2: f32[n, 32] = slice(%x) {dim = 1, end = [64], start = [32]}
%t1: f32[n, 4] = matmul(%s1, %a1)
%t2: f32[n, 4] = matmul(%s2, %a2)
%two: f32[] = constant() {dtype = f32, value = 2.0}
%u1: f32[n, 4] = mul(%t1, %two)
%u2: f32[n, 4] = exp(%t2)
output %u1, %u2
)");
  KernelPlan plan = emit_cuda(run_pipeline(g));
  ASSERT_EQ(launch_sites(plan), 1u) << listing(plan);
  EXPECT_NE(plan.kernels[0].summary.find("2 problems on blockIdx.z"), std::string::npos);
  EXPECT_NE(plan.kernels[0].summary.find("[scalar tile"), std::string::npos);
  expect_matches_reference(g, {});
}

// A grouped group whose problems read B in different layouts ([K, N] and a transposed [N, K]):
// the tensor-core mainloop differs, so each problem gets its own kernel, and says so.
TEST(GroupedGemm, ProblemsOnDifferentTilesRunAsAKernelEach) {
  Graph g = parse(R"(graph @two_layouts
sym n in [0, inf] div 1
input %x1: bf16[n, 64]
input %x2: bf16[n, 64]
input %w1: bf16[64, 48]
input %w2: bf16[48, 64]
%y1: bf16[n, 48] = matmul(%x1, %w1) {fusion = 1, gemm_problem = 0}
%w2t: bf16[64, 48] = permute(%w2) {dims = [1, 0], fusion = 1, gemm_problem = 1}
%y2: bf16[n, 48] = matmul(%x2, %w2t) {fusion = 1, gemm_problem = 1}
output %y1, %y2
)");
  KernelPlan plan = emit_cuda(g);
  ASSERT_EQ(launch_sites(plan), 2u) << listing(plan);
  for (const KernelLaunch& k : plan.kernels) {
    EXPECT_NE(k.summary.find("(grouped GEMM problem on a tile of its own)"), std::string::npos)
        << k.summary;
    EXPECT_NE(k.summary.find("[tensor cores"), std::string::npos) << k.summary;
  }
  std::vector<std::string> names = pipeline_pass_names();
  expect_matches_reference(g, {names.begin(), names.end()});
}

}  // namespace
}  // namespace dg
