// The expert MLP's backward graphs, compiled once through the whole pipeline (fusion included)
// for the host emulation and run for many token counts, against the reference evaluator run on
// the UNFUSED graph. Fused kernels add in other orders than the unfused graph (weight gradients
// summed per token chunk, grad_x's terms in one accumulator; the rank-r products split K, Note
// [Rank-r products]), so the check is the dtype's tolerance at the tensor's scale (Note [Tolerance
// at the tensor's scale] in runtime/host_run.h; for bf16 |a - e| <= 1.6e-2 |e| +
// 1e-2 max(1, max |e|)). Each case is short (host emulation is slow): the token counts are split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "ir/text_format.h"
#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "runtime/reference/reference_eval.h"
#include "tests/common/fixtures.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

using testing::resized_seed;

Graph seed_backward(int64_t hidden, int64_t ffn, int64_t rank) {
  return resized_seed("seed_expert_mlp_backward.dgir", hidden, ffn, rank);
}

Graph load(const std::string& name) { return testing::load_fixture(name); }

// One disk cache for every case of this binary, so only the first case of a graph compiles.
std::string cache_dir() { return testing::shared_cache_dir("dyngen-test-backward-numerics"); }

// The reference runs on the unfused graph.
void check_token_counts(const Graph& g, const std::string& symbol,
                        const std::vector<int64_t>& token_counts) {
  testing::check_every_token_count(g, symbol, token_counts, cache_dir(),
                                   testing::SweepCompiles::kAtMostOne);
}

// Note [Tolerance at the tensor's scale]: a cancellation an ulp of the terms off passes at the
// tensor's scale and fails element-wise; an error past the scaled bound fails in both modes.
TEST(ToleranceAtTensorScale, CancellationPassesAndRealErrorsFail) {
  HostTensor expected = make_tensor(DType::kBF16, {3}, {8000, -8000, 0});
  auto check = [&](double third, ToleranceMode mode) {
    return compare_to_reference(make_tensor(DType::kBF16, {3}, {8000, -8000, third}), expected,
                                mode)
        .ok;
  };
  EXPECT_FALSE(check(64, ToleranceMode::kElementwise));
  EXPECT_TRUE(check(64, ToleranceMode::kTensorScale));  // 64 <= 1e-2 * 8000
  EXPECT_FALSE(check(160, ToleranceMode::kTensorScale));
  EXPECT_TRUE(check(0, ToleranceMode::kElementwise));
  // An f32 output of a bf16 graph (a LoRA weight gradient) takes bf16's tolerance at its scale.
  HostTensor grad = make_tensor(DType::kF32, {2}, {100, 1});
  HostTensor moved = make_tensor(DType::kF32, {2}, {100.5, 1});
  EXPECT_FALSE(compare_to_reference(moved, grad, ToleranceMode::kTensorScale).ok);
  EXPECT_TRUE(compare_to_reference(moved, grad, ToleranceMode::kTensorScale, 1.0, DType::kBF16).ok);
  EXPECT_FALSE(
      compare_to_reference(moved, grad, ToleranceMode::kElementwise, 1.0, DType::kBF16).ok);
}

// OLMoE: hidden 2048, ffn 1024, r = 16 (the fixture's own sizes).
TEST(BackwardNumerics, OlmoeTinyTokenCounts) {
  check_token_counts(seed_backward(2048, 1024, 16), "s77", {0, 1, 2, 15, 16, 17});
}
TEST(BackwardNumerics, OlmoeAround32) {
  check_token_counts(seed_backward(2048, 1024, 16), "s77", {31, 32, 33});
}
TEST(BackwardNumerics, OlmoeAround64) {
  check_token_counts(seed_backward(2048, 1024, 16), "s77", {63, 64, 65});
}
TEST(BackwardNumerics, OlmoeAround128) {
  check_token_counts(seed_backward(2048, 1024, 16), "s77", {127, 128, 129});
}
// Where the rank-r products change their K split (Note [Rank-r products]).
TEST(BackwardNumerics, OlmoeAround256) {
  check_token_counts(seed_backward(2048, 1024, 16), "s77", {255, 256, 257});
}
// Where the weight gradients' chunks grow past 64 tokens (Note [Weight-gradient groups]: 8 of 64
// at 512, 7 of 80 at 513).
TEST(BackwardNumerics, OlmoeAround512) {
  check_token_counts(seed_backward(2048, 1024, 16), "s77", {511, 512, 513});
}
TEST(BackwardNumerics, Olmoe1000) {
  check_token_counts(seed_backward(2048, 1024, 16), "s77", {1000});
}
TEST(BackwardNumerics, Olmoe500) {
  check_token_counts(seed_backward(2048, 1024, 16), "s77", {500});
}

// Sizes that are no tile multiple: hidden 320, ffn 200, r = 64.
TEST(BackwardNumerics, NoTileMultipleSmall) {
  check_token_counts(seed_backward(320, 200, 64), "s77", {0, 1, 2, 15, 16, 17, 63, 64, 65});
}
TEST(BackwardNumerics, NoTileMultipleLarge) {
  check_token_counts(seed_backward(320, 200, 64), "s77", {127, 128, 129, 500});
}

// Phi-3.5-MoE: hidden 4096, ffn 6400, r = 16.
TEST(BackwardNumerics, Phi35MoeOneToken) {
  check_token_counts(seed_backward(4096, 6400, 16), "s77", {1});
}
TEST(BackwardNumerics, Phi35Moe17) {
  check_token_counts(seed_backward(4096, 6400, 16), "s77", {17});
}
TEST(BackwardNumerics, Phi35Moe65) {
  check_token_counts(seed_backward(4096, 6400, 16), "s77", {65});
}

// A DBRX-style expert backward at a reduced size: SwiGLU without LoRA, weights as strided slices
// of fused parameters (two kernels: the down GEMM with the SwiGLU backward, the K-concatenated
// gate/up GEMM, both reading the weight slices in place).
TEST(BackwardNumerics, DbrxExpertReduced) {
  check_token_counts(load("dbrx_expert_backward.dgir"), "s", {2, 17, 64, 129});
}
// Around every edge of its small-M tiles' rows (Note [Tile choice]) and the switch to the default.
TEST(BackwardNumerics, DbrxExpertAroundTileEdges) {
  check_token_counts(load("dbrx_expert_backward.dgir"), "s",
                     {15, 16, 31, 32, 33, 63, 65, 127, 128, 511, 512, 513, 1024, 1025});
}

// Note [Tile choice]: a tensor-core GEMM holds a default tile and a 32 x 64 tile for the M where
// the default launches under two waves; each call launches one by M. The seed's own shapes switch
// at 1025 and 2049 tokens, minutes of emulation, so these graphs keep hidden or ffn at 64 and the
// other wide (8192): the wide GEMMs switch at 129 (gate/up, two B operands) or 257 tokens. The
// test checks that each token count launched one variant of every GEMM and that a GEMM of the
// graph ran both of its variants, each checked against the reference.
void check_every_variant_runs(const Graph& g, const std::string& symbol,
                              const std::vector<int64_t>& token_counts) {
  check_token_counts(g, symbol, token_counts);
  CompileRequest req;
  req.target = "host";
  req.cache_dir = cache_dir();
  CompileOutcome o = compile_graph(g, req);  // a cache hit: the plan check_token_counts ran
  ASSERT_TRUE(o.ok()) << o.error;
  const std::vector<KernelLaunch>& kernels = o.executable->plan().kernels;
  int switched = 0;  // GEMMs that ran more than one variant over the token counts
  for (size_t first = 0; first < kernels.size(); ++first) {
    size_t end = first + 1;
    while (end < kernels.size() && kernels[end].variant > 0) ++end;
    std::set<size_t> ran;
    for (int64_t s : token_counts) {
      int launched = 0;
      for (size_t k = first; k < end; ++k) {
        if (kernels[k].fallback) continue;  // only a call that cannot run the others runs it
        // The plan names the graph's one symbol canonically (s0): every symbol is the token count.
        bool on = true;
        for (const SymExpr& e : kernels[k].grid)
          on = on &&
               e.evaluate([&](const SymExpr&) -> std::optional<int64_t> { return s; }).value() > 0;
        if (on) ran.insert(k);
        launched += on;
      }
      if (s > 0) {
        EXPECT_EQ(launched, 1) << kernels[first].name << " at " << symbol << " = " << s;
      }
    }
    switched += ran.size() > 1;
    first = end - 1;
  }
  EXPECT_GE(switched, 1) << "no GEMM ran two tile variants";
}

TEST(TileVariantNumerics, ForwardGateUpSwitchesAt129) {
  check_every_variant_runs(resized_seed("seed_expert_mlp.dgir", 64, 8192, 16), "s77", {128, 129});
}
TEST(TileVariantNumerics, ForwardDownSwitchesAt257) {
  check_every_variant_runs(resized_seed("seed_expert_mlp.dgir", 8192, 64, 16), "s77", {256, 257});
}
TEST(TileVariantNumerics, BackwardDgradSwitchesAt257) {
  check_every_variant_runs(seed_backward(64, 8192, 16), "s77", {256, 257});
}
TEST(TileVariantNumerics, BackwardGradXSwitchesAt257) {
  check_every_variant_runs(seed_backward(8192, 64, 16), "s77", {256, 257});
}

// The backward AOTAutograd really produced for the seed module (gather and scatter included).
TEST(BackwardNumerics, CapturedAotBackward) {
  check_token_counts(load("seed_expert_mlp_backward_aot.dgir"), "s0", {2, 17, 65});
}

}  // namespace
}  // namespace dg
