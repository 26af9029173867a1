// The fused forward graphs (Note [Fusion groups]): the seed's LoRA expert MLP in at most four
// kernels, and LoRA MLPs of several model shapes plus a DBRX-style expert under host emulation,
// each checked against the reference evaluator run on the UNFUSED graph at the tensor's scale (the
// rank-r products split K: Note [Tolerance at the tensor's scale]). ctest runs
// every (shape, token count) pair as its own case; they share one cache folder, so each shape's
// host module is compiled once per run.
#include <gtest/gtest.h>

#include <iostream>

#include "codegen/emit_cuda.h"
#include "ir/text_format.h"
#include "passes/pipeline.h"
#include "runtime/compiler.h"
#include "runtime/emu/device_headers.h"
#include "runtime/host_run.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/common/fixtures.h"
#include "tests/common/plan_ptxas_log.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

using testing::expect_matches_reference_at;

Graph parse(const std::string& text) { return testing::parse_or_fail(text); }

// The seed's LoRA expert MLP with hidden size h, FFN size f and rank r; the token count ranges
// over [0, inf] (the issue asks for 0 and 1 too; Dynamo would specialize them).
Graph lora_mlp(int h, int f, int r) {
  return testing::resized_seed("seed_expert_mlp.dgir", h, f, r);
}

// A DBRX-style expert at a reduced size: SwiGLU without LoRA, weights as slices of the fused
// parameters (w1.view(n, ffn, -1)[e].t(), and w2.view(n, ffn, -1)[e] for the down product).
Graph dbrx_expert() {
  return parse(R"(graph @dbrx_expert
sym s in [0, inf] div 1
input %x: bf16[s, 128]
input %w1: bf16[768, 128]
input %v1: bf16[768, 128]
input %w2: bf16[768, 128]
%w1v: bf16[4, 192, 128] = reshape(%w1) {shape = [4, 192, 128]}
%w1e: bf16[1, 192, 128] = slice(%w1v) {dim = 0, end = [3], start = [2]}
%w1s: bf16[192, 128] = reshape(%w1e) {shape = [192, 128]}
%w1t: bf16[128, 192] = permute(%w1s) {dims = [1, 0]}
%v1v: bf16[4, 192, 128] = reshape(%v1) {shape = [4, 192, 128]}
%v1e: bf16[1, 192, 128] = slice(%v1v) {dim = 0, end = [3], start = [2]}
%v1s: bf16[192, 128] = reshape(%v1e) {shape = [192, 128]}
%v1t: bf16[128, 192] = permute(%v1s) {dims = [1, 0]}
%w2v: bf16[4, 192, 128] = reshape(%w2) {shape = [4, 192, 128]}
%w2e: bf16[1, 192, 128] = slice(%w2v) {dim = 0, end = [3], start = [2]}
%w2s: bf16[192, 128] = reshape(%w2e) {shape = [192, 128]}
%gate: bf16[s, 192] = matmul(%x, %w1t)
%up: bf16[s, 192] = matmul(%x, %v1t)
%act: bf16[s, 192] = silu(%gate)
%h: bf16[s, 192] = mul(%act, %up)
%y: bf16[s, 128] = matmul(%h, %w2s)
output %y
)");
}

std::string cache_dir() { return testing::shared_cache_dir("dyngen-fused-forward-cache"); }

struct ShapeCase {
  std::string name;
  Graph (*make)();
  std::string symbol;
  int64_t tokens;
};

void PrintTo(const ShapeCase& c, std::ostream* os) { *os << c.name; }

Graph olmoe() { return lora_mlp(2048, 1024, 16); }
Graph ragged() { return lora_mlp(320, 200, 64); }
Graph phimoe() { return lora_mlp(4096, 6400, 16); }

std::vector<ShapeCase> all_cases() {
  std::vector<ShapeCase> cases;
  for (int64_t s : {0, 1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 500}) {
    cases.push_back({"olmoe_s" + std::to_string(s), &olmoe, "s77", s});
    cases.push_back({"ragged_320_200_r64_s" + std::to_string(s), &ragged, "s77", s});
  }
  for (int64_t s : {1, 17, 65})
    cases.push_back({"phimoe_s" + std::to_string(s), &phimoe, "s77", s});
  for (int64_t s : {0, 1, 33, 130})
    cases.push_back({"dbrx_s" + std::to_string(s), &dbrx_expert, "s", s});
  return cases;
}

// The seed's forward graph: the rank-r products of gate and up (split over K, the partials summed
// by the last CTA of each row tile: Note [Last block reduces]), gate/up GEMM with LoRA epilogues
// and SwiGLU, the rank-r product of down (one kernel likewise), the down GEMM with its LoRA
// epilogue.
TEST(FusedForwardPlan, SeedForwardRunsAsAtMostFourKernels) {
  Graph g = testing::load_fixture("seed_expert_mlp.dgir");
  CompileRequest req;
  req.target = "host";
  req.cache_dir = cache_dir();
  CompileOutcome o = compile_graph(g, req);
  ASSERT_TRUE(o.ok()) << o.error;
  const KernelPlan& plan = o.executable->plan();
  std::string listing;
  for (const KernelLaunch& k : plan.kernels) listing += k.name + ": " + k.summary + "\n";
  EXPECT_LE(launch_sites(plan), 4u) << listing;  // tile variants of a GEMM count once
  int tensor_core = 0;
  for (const KernelLaunch& k : plan.kernels)
    tensor_core += k.variant == 0 && k.summary.find("[tensor cores") != std::string::npos;
  EXPECT_EQ(tensor_core, 2) << listing;  // gate/up and down
  // Workspace: the rank-r products (3 x 16 f32) and the SwiGLU output (1024 bf16) per token, and
  // the rank-r partials: at most 16 K splits of each product's (padded) 32 f32 columns.
  auto bytes =
      plan.workspace_bytes.evaluate([](const SymExpr&) -> std::optional<int64_t> { return 1000; });
  ASSERT_TRUE(bytes.has_value()) << plan.workspace_bytes.to_string();
  EXPECT_LE(*bytes, 1000 * (3 * 16 * 4 + 1024 * 2) + 1000 * 2 * 16 * 32 * 4 + 6 * 256) << listing;
  std::cout << listing << "workspace: " << plan.workspace_bytes.to_string() << "\n";
}

class FusedForward : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(FusedForward, MatchesTheReferenceOnTheUnfusedGraph) {
  const ShapeCase& c = GetParam();
  Graph g = c.make();
  CompileRequest req;
  req.target = "host";
  req.cache_dir = cache_dir();
  CompileOutcome o = compile_graph(g, req);
  ASSERT_TRUE(o.ok()) << o.error;
  SCOPED_TRACE(c.name);
  expect_matches_reference_at(g, *o.executable, c.symbol, c.tokens, 1000 + c.tokens,
                              ToleranceMode::kTensorScale);
}

// Compiles g for the host and checks it against the reference evaluator for each size of its
// symbol n (inputs seeded with seed + n).
void compile_and_check(const Graph& g, std::initializer_list<int64_t> sizes, int seed) {
  CompileRequest req;
  req.target = "host";
  req.cache_dir = cache_dir();
  CompileOutcome o = compile_graph(g, req);
  ASSERT_TRUE(o.ok()) << o.error;
  for (int64_t n : sizes) {
    expect_matches_reference_at(g, *o.executable, "n", n, seed + n);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Static facts decide the GEMM path: rows of 36 bf16 (72 bytes) cannot feed 16-byte cp.async
// copies, so that linear takes the scalar tile; rows of 40 take tensor cores. Both are correct.
TEST(FusedForwardPlan, UnalignedRowsTakeTheScalarTile) {
  Graph g = parse(R"(graph @two_linears
sym n in [0, inf] div 1
input %x: bf16[n, 36]
input %w: bf16[24, 36]
input %y: bf16[n, 40]
input %v: bf16[24, 40]
%a: bf16[n, 24] = linear(%x, %w)
%b: bf16[n, 24] = linear(%y, %v)
output %a, %b
)");
  KernelPlan plan = emit_cuda(run_pipeline(g));
  ASSERT_EQ(launch_sites(plan), 2u);
  EXPECT_NE(plan.kernels[0].summary.find("[scalar tile"), std::string::npos)
      << plan.kernels[0].summary;
  EXPECT_NE(plan.kernels[1].summary.find("[tensor cores"), std::string::npos)
      << plan.kernels[1].summary;
  compile_and_check(g, {0, 3, 70}, 5);
}

// Attention's input gradient dx = dq Wq^T + dk Wk^T + dv Wv^T becomes one GEMM over the
// concatenated K (concat_gemm_k): the third weight's view is read by the cat as its third input,
// which is a load of the GEMM, not the epilogue (this once failed to compile).
TEST(FusedForwardPlan, ThreeWayConcatenatedKGemm) {
  Graph g = parse(R"(graph @three_projections_backward
sym n in [0, inf] div 1
input %dq: f32[n, 32]
input %dk: f32[n, 16]
input %dv: f32[n, 16]
input %wq: f32[32, 32]
input %wk: f32[32, 16]
input %wv: f32[32, 16]
%tq: f32[32, 32] = permute(%wq) {dims = [1, 0]}
%tk: f32[16, 32] = permute(%wk) {dims = [1, 0]}
%tv: f32[16, 32] = permute(%wv) {dims = [1, 0]}
%a: f32[n, 32] = matmul(%dq, %tq)
%b: f32[n, 32] = matmul(%dk, %tk)
%c: f32[n, 32] = matmul(%dv, %tv)
%ab: f32[n, 32] = add(%a, %b)
%dx: f32[n, 32] = add(%ab, %c)
output %dx
)");
  EXPECT_EQ(launch_sites(emit_cuda(run_pipeline(g))), 1u);
  compile_and_check(g, {0, 1, 37}, 11);
}

// Pointwise chains fold into a reduction: the prologue (exp, mul with a broadcast operand, and a
// value that is also an output) runs inside the reduction's loop, the epilogue over its result.
TEST(FusedForwardPlan, ReductionPrologueAndEpilogue) {
  Graph g = parse(R"(graph @softmax_like
sym n in [0, inf] div 1
input %x: f32[n, 5, 7]
input %w: bf16[7]
%e: f32[n, 5, 7] = exp(%x)
%m: f32[n, 5, 7] = mul(%e, %w)
%s: f32[n, 7] = sum(%m) {dims = [1], keepdim = 0}
%one: f32[] = constant() {dtype = f32, value = 1.0}
%t: f32[n, 7] = add(%s, %one)
%r: bf16[n, 7] = cast(%t) {dtype = bf16}
%a: f32[n, 1, 7] = amax(%x) {dims = [1], keepdim = 1}
%b: f32[n, 1, 7] = neg(%a)
output %r, %m, %b
)");
  KernelPlan plan = emit_cuda(run_pipeline(g));
  std::string listing;
  for (const KernelLaunch& k : plan.kernels) listing += k.name + ": " + k.summary + "\n";
  EXPECT_EQ(launch_sites(plan), 2u) << listing;
  CompileRequest req;
  req.target = "host";
  req.cache_dir = cache_dir();
  CompileOutcome o = compile_graph(g, req);
  ASSERT_TRUE(o.ok()) << o.error;
  for (int64_t n : {1, 4, 300}) {
    expect_matches_reference_at(g, *o.executable, "n", n, 9 + n);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// A reduction whose epilogue writes several outputs of rank 4: the kernel's output parameters
// (o1, o3: numbered by slot) and the epilogue's index variables never share a name (they once did,
// and the kernel did not compile).
TEST(FusedForwardPlan, ReductionEpilogueWithSeveralOutputsOfHighRank) {
  Graph g = parse(R"(graph @two_scaled_sums
sym n in [1, inf] div 1
input %x: f32[n, 1, 4, 2, 16]
input %u: bf16[n, 4, 2, 16]
input %v: bf16[n, 4, 2, 16]
%s: f32[n, 4, 2, 16] = sum(%x) {dims = [1], keepdim = 0}
%c: bf16[n, 4, 2, 16] = cast(%s) {dtype = bf16}
%a: bf16[n, 4, 2, 16] = mul(%c, %u)
%b: bf16[n, 4, 2, 16] = mul(%c, %v)
output %a, %b
)");
  KernelPlan plan = emit_cuda(run_pipeline(g));
  EXPECT_EQ(launch_sites(plan), 1u);
  CompileRequest req;
  req.target = "host";
  req.cache_dir = cache_dir();
  CompileOutcome o = compile_graph(g, req);
  ASSERT_TRUE(o.ok()) << o.error;
  for (int64_t n : {1, 3}) expect_matches_reference_at(g, *o.executable, "n", n, 5 + n);
}

// Every kernel of the fused graphs compiles for sm_80 and sm_90a without spilling and within the
// 48 KB of static shared memory (ptxas's report, -Xptxas -v).
class FusedPtxas : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(FusedPtxas, NoSpillsAndSharedMemoryFits) {
  KernelPlan plan = emit_cuda(run_pipeline(GetParam().make()));
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CompileOptions options;
    options.arch = arch;
    options.extra_options = {"-Xptxas", "-v"};
    auto compiled = testing::plan_ptxas_log(plan, options);
    ASSERT_TRUE(compiled.ok()) << compiled.message();
    const std::string& log = compiled.value();
    size_t kernels = 0;
    for (size_t at = log.find("spill stores"); at != std::string::npos;
         at = log.find("spill stores", at + 1)) {
      ++kernels;
      const size_t line = log.rfind('\n', at);
      const std::string text = log.substr(line + 1, log.find('\n', at) - line - 1);
      EXPECT_NE(text.find(", 0 bytes spill stores, 0 bytes spill loads"), std::string::npos)
          << arch << ": " << text;
    }
    EXPECT_EQ(kernels, plan.kernels.size()) << log;
    for (size_t at = log.find(" bytes smem"); at != std::string::npos;
         at = log.find(" bytes smem", at + 1)) {
      const size_t start = log.rfind(' ', at - 1) + 1;
      EXPECT_LE(std::stol(log.substr(start, at - start)), 48 * 1024) << arch << ": " << log;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, FusedPtxas,
                         ::testing::Values(ShapeCase{"olmoe", &olmoe, "s77", 0},
                                           ShapeCase{"phimoe", &phimoe, "s77", 0},
                                           ShapeCase{"dbrx", &dbrx_expert, "s", 0},
                                           ShapeCase{"ragged_320_200_r64", &ragged, "s77", 0}),
                         [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(Shapes, FusedForward, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dg
