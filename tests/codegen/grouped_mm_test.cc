// grouped_mm and grouped_mm_wgrad (Note [Grouped experts ops] in ir/shape_infer_grouped.cc)
// under the host emulation against the reference evaluator: both weight forms (one fused [E, ...]
// parameter, E separate ones), both layouts, bf16 (tensor cores, and the scalar tile for a ragged
// K) and f32, OLMoE's, Phi's and DBRX's E/k, token counts around the tiles, routings with empty
// experts and with every row on one expert; the same bits under the emulation's adversarial
// schedules; rows past the last offset are zeros and bad offsets are an error; the generated
// kernels compile for sm_80 and sm_90a (wgmma, grouped_mm_sm90_test.cc) without spills.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "codegen/emit_cuda.h"
#include "ir/graph.h"
#include "passes/pipeline.h"
#include "runtime/compiler.h"
#include "runtime/emu/device_headers.h"
#include "runtime/host_run.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/codegen/grouped_cases.h"
#include "tests/common/fixtures.h"
#include "tests/common/plan_ptxas_log.h"
#include "tests/common/ptxas_spills.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

class GroupedMmNumerics : public ::testing::TestWithParam<GroupedCase> {};

TEST_P(GroupedMmNumerics, MatchesTheReferenceForEveryRoutingAndTokenCount) {
  const GroupedCase& c = GetParam();
  const Graph g = grouped_graph(c);
  auto exe = testing::compile_for_host(g);
  ASSERT_TRUE(exe);
  for (int64_t t : c.tokens) {
    for (Routing r : {Routing::kRandom, Routing::kOneExpert, Routing::kTwoExperts}) {
      SCOPED_TRACE("t=" + std::to_string(t) + " routing " + std::to_string(static_cast<int>(r)));
      auto inputs = make_random_inputs(g, {{"t", t}}, 40 + t);
      ASSERT_TRUE(inputs.ok()) << inputs.message();
      route(inputs.value()[0], r, c.experts);
      auto checks = check_against_reference(g, *exe, inputs.value());
      ASSERT_TRUE(checks.ok()) << checks.message();
      for (const OutputCheck& check : checks.value()) EXPECT_TRUE(check.ok) << check.message;
    }
  }
  // The adversarial schedules give the same bits (no float atomics, fixed orders).
  const int64_t t = c.tokens.back();
  auto inputs = make_random_inputs(g, {{"t", t}}, 7);
  ASSERT_TRUE(inputs.ok());
  expect_same_bits_under_adversarial_emulation(*exe, inputs.value());
}

// Token counts put R = k * t below, at and past the 64-row tiles.
INSTANTIATE_TEST_SUITE_P(
    Experts, GroupedMmNumerics,
    ::testing::Values(
        GroupedCase{
            "olmoe_64x8_bf16_fused_nk", 64, 8, DType::kBF16, true, false, 48, 32, {1, 8, 9, 33}},
        GroupedCase{
            "olmoe_64x8_bf16_separate_kn", 64, 8, DType::kBF16, false, true, 40, 24, {1, 17}},
        GroupedCase{
            "phi_16x2_bf16_separate_nk", 16, 2, DType::kBF16, false, false, 136, 40, {1, 32, 97}},
        GroupedCase{
            "dbrx_16x4_bf16_fused_kn", 16, 4, DType::kBF16, true, true, 72, 48, {1, 16, 50}},
        GroupedCase{"dbrx_16x4_f32_fused_nk", 16, 4, DType::kF32, true, false, 70, 20, {1, 50}},
        GroupedCase{"lora_16x2_f32_separate_kn", 16, 2, DType::kF32, false, true, 16, 36, {1, 97}},
        GroupedCase{"ragged_k_bf16_fused_nk", 16, 4, DType::kBF16, true, false, 33, 20, {1, 29}}),
    [](const auto& info) { return info.param.name; });

// Offsets handed in directly: rows past offs[E-1] are zeros; offsets that no routing gives
// (decreasing, past R) end the launch with a message, nothing read or written out of bounds.
TEST(GroupedMmOffsets, RowsPastTheLastOffsetAreZeroAndBadOffsetsAreAnError) {
  GraphBuilder b("offsets");
  SymExpr r = b.symbol("r", 1);
  ValueId a = b.input(DType::kBF16, {r, 16});
  ValueId offs = b.input(DType::kI32, {3});
  ValueId w = b.input(DType::kBF16, {3, 8, 16});
  b.output(b.op(OpKind::kGroupedMm, {a, offs, w}, {{"w_layout", int64_t{0}}}));
  ValueId g = b.input(DType::kBF16, {r, 8});
  b.output(b.op(OpKind::kGroupedMmWgrad, {g, a, offs}));
  const Graph graph = b.finish();
  auto exe = testing::compile_for_host(graph);
  ASSERT_TRUE(exe);
  auto inputs = make_random_inputs(graph, {{"r", 70}}, 5);
  ASSERT_TRUE(inputs.ok());
  inputs.value()[1] = make_tensor(DType::kI32, {3}, {0, 20, 65});  // expert 0 empty, 5 rows past
  auto checks = check_against_reference(graph, *exe, inputs.value());
  ASSERT_TRUE(checks.ok()) << checks.message();
  for (const OutputCheck& check : checks.value()) EXPECT_TRUE(check.ok) << check.message;
  auto out = run_on_host(*exe, inputs.value());
  ASSERT_TRUE(out.ok());
  for (int64_t i = 65 * 8; i < 70 * 8; ++i) EXPECT_EQ(out.value()[0].get(i), 0.0) << i;

  for (const std::vector<double>& bad : {std::vector<double>{0, 30, 20}, {0, 20, 71}}) {
    inputs.value()[1] = make_tensor(DType::kI32, {3}, bad);
    auto failed = run_on_host(*exe, inputs.value());
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.message().find("is not a non-decreasing offset within [0, 70]"),
              std::string::npos)
        << failed.message();
  }
}

class GroupedSpills : public ::testing::TestWithParam<std::string> {};

TEST_P(GroupedSpills, TheMoeLayerAndEveryCaseCompileWithoutSpills) {
  std::vector<Graph> graphs{
      testing::load_fixture("olmoe_grouped_moe_layer.dgir"),
      grouped_graph({"f32", 16, 2, DType::kF32, false, true, 16, 36, {}}),
      grouped_graph({"ragged", 16, 4, DType::kBF16, true, false, 33, 20, {}}),
      grouped_graph({"kn", 16, 4, DType::kBF16, true, true, 72, 48, {}}),
      // 65 tensor maps (8 KB of parameters) on sm_90a, B K- and N-major
      grouped_graph({"maps", 64, 8, DType::kBF16, false, false, 264, 72, {}}),
      grouped_graph({"maps_kn", 64, 8, DType::kBF16, false, true, 72, 136, {}})};
  for (const Graph& g : graphs) {
    // On sm_90a with its wgmma kernels (Note [Grouped wgmma tile]).
    KernelPlan plan = emit_cuda(run_pipeline(g), codegen_options_for(GetParam(), {}));
    CompileOptions opts;
    opts.arch = GetParam();
    opts.extra_options = {"--ptxas-options=-v"};
    auto log = testing::plan_ptxas_log(plan, opts);
    ASSERT_TRUE(log.ok()) << g.name << ": " << log.message();
    int kernels = 0;
    EXPECT_EQ(testing::spilled_kernels(log.value(), &kernels), "") << g.name;
    EXPECT_EQ(kernels, static_cast<int>(plan.kernels.size())) << g.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, GroupedSpills, ::testing::Values("sm_80", "sm_90a"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dg
