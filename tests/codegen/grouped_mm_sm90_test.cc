// grouped_mm on sm_90a (Note [Grouped wgmma tile] in codegen/device/dg_grouped_sm90.cuh) under
// the host emulation against the reference evaluator: one fused [E, N, K] map, per-expert maps
// (E separate weights, a fused [E, K, N] parameter), B N-major, the 128 x 128 and 128 x 256 tiles
// with partial column and k tiles; E/k = 64/8, 16/4, 16/2 and 16/1 (R = 1); routings with empty
// experts and with every row on one expert, R below, at and past the 128-row tile; the same bits
// under the adversarial schedules; bad offsets an error; a refused tensor map or an output off
// its pairs' boundary runs the mma.sync fallback with the sm_80 build's bits.
#include <gtest/gtest.h>

#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "runtime/runtime_stats.h"
#include "tests/codegen/grouped_cases.h"
#include "tests/codegen/shifted_input.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

CompileOutcome compile_sm90(const Graph& g) {
  CompileRequest req;
  req.target = "host";
  req.source_arch = "sm_90a";
  req.cache_dir = testing::shared_cache_dir("dyngen-grouped-wgmma-cache");
  return compile_graph(g, req);
}

int wgmma_kernels(const KernelPlan& plan, const std::string& tile) {
  int n = 0;
  for (const KernelLaunch& k : plan.kernels)
    n += k.summary.find("grouped_mm over") != std::string::npos &&
         k.summary.find("[wgmma " + tile) != std::string::npos;
  return n;
}

struct Sm90Case {
  GroupedCase c;
  std::string tile;  // the wgmma tile the case must run
  int maps;          // its tensor maps
};

void PrintTo(const Sm90Case& s, std::ostream* os) { *os << s.c.name; }

class GroupedMmSm90 : public ::testing::TestWithParam<Sm90Case> {};

TEST_P(GroupedMmSm90, MatchesTheReferenceForEveryRoutingAndTokenCount) {
  const GroupedCase& c = GetParam().c;
  const Graph g = grouped_graph(c);
  CompileOutcome o = compile_sm90(g);
  ASSERT_TRUE(o.ok()) << o.error;
  const Executable& exe = *o.executable;
  ASSERT_EQ(wgmma_kernels(exe.plan(), GetParam().tile), 1);
  for (const KernelLaunch& k : exe.plan().kernels) {
    if (k.summary.find("[wgmma") != std::string::npos) {
      EXPECT_EQ(static_cast<int>(k.tensor_maps.size()), GetParam().maps);
    }
  }
  const int64_t fallbacks = runtime_stats().tma_fallback_launches;
  for (int64_t t : c.tokens) {
    for (Routing r : {Routing::kRandom, Routing::kOneExpert, Routing::kTwoExperts}) {
      SCOPED_TRACE("t=" + std::to_string(t) + " routing " + std::to_string(static_cast<int>(r)));
      auto inputs = make_random_inputs(g, {{"t", t}}, 40 + t);
      ASSERT_TRUE(inputs.ok()) << inputs.message();
      route(inputs.value()[0], r, c.experts);
      auto checks = check_against_reference(g, exe, inputs.value());
      ASSERT_TRUE(checks.ok()) << checks.message();
      for (const OutputCheck& check : checks.value()) EXPECT_TRUE(check.ok) << check.message;
    }
  }
  EXPECT_EQ(runtime_stats().tma_fallback_launches, fallbacks) << "aligned maps were refused";
  // The adversarial schedules (copies landing at issue or at random, threads interleaved) give
  // the same bits.
  auto inputs = make_random_inputs(g, {{"t", c.tokens.back()}}, 7);
  ASSERT_TRUE(inputs.ok());
  expect_same_bits_under_adversarial_emulation(exe, inputs.value());
}

// R = k t around the 128-row tile (t = 16 and 17 at k = 8: R = 128 and 136); N and K with a
// partial column tile and a partial k tile.
INSTANTIATE_TEST_SUITE_P(
    Experts, GroupedMmSm90,
    ::testing::Values(
        Sm90Case{
            {"olmoe_64x8_fused_nk", 64, 8, DType::kBF16, true, false, 136, 200, {1, 16, 17, 40}},
            "128x128x64",
            2},
        Sm90Case{{"olmoe_64x8_separate_nk", 64, 8, DType::kBF16, false, false, 264, 72, {1, 17}},
                 "128x256x64",
                 65},
        Sm90Case{{"dbrx_16x4_fused_kn", 16, 4, DType::kBF16, true, true, 72, 136, {1, 33, 50}},
                 "128x128x64, 4 stages, B N-major",
                 17},
        Sm90Case{{"phi_16x2_separate_kn", 16, 2, DType::kBF16, false, true, 64, 128, {1, 70}},
                 "128x64x64, 4 stages, B N-major",
                 17},
        Sm90Case{{"r1_16x1_fused_nk", 16, 1, DType::kBF16, true, false, 128, 64, {1, 2, 129}},
                 "128x128x64",
                 2}),
    [](const auto& info) { return info.param.c.name; });

// Offsets handed in directly, as in grouped_mm_test.cc: rows past offs[E-1] are zeros, empty
// experts and R off the tile; offsets that no routing gives end the launch with a message.
TEST(GroupedMmSm90Offsets, RowsPastTheLastOffsetAreZeroAndBadOffsetsAreAnError) {
  GraphBuilder b("offsets_sm90");
  SymExpr r = b.symbol("r", 1);
  ValueId a = b.input(DType::kBF16, {r, 64});
  ValueId offs = b.input(DType::kI32, {3});
  ValueId w = b.input(DType::kBF16, {3, 128, 64});
  b.output(b.op(OpKind::kGroupedMm, {a, offs, w}, {{"w_layout", int64_t{0}}}));
  const Graph graph = b.finish();
  CompileOutcome o = compile_sm90(graph);
  ASSERT_TRUE(o.ok()) << o.error;
  ASSERT_EQ(wgmma_kernels(o.executable->plan(), "128x128x64"), 1);
  auto inputs = make_random_inputs(graph, {{"r", 200}}, 5);
  ASSERT_TRUE(inputs.ok());
  inputs.value()[1] = make_tensor(DType::kI32, {3}, {0, 130, 190});  // 10 rows past
  auto checks = check_against_reference(graph, *o.executable, inputs.value());
  ASSERT_TRUE(checks.ok()) << checks.message();
  for (const OutputCheck& check : checks.value()) EXPECT_TRUE(check.ok) << check.message;
  auto out = run_on_host(*o.executable, inputs.value());
  ASSERT_TRUE(out.ok());
  for (int64_t i = 190 * 128; i < 200 * 128; ++i) ASSERT_EQ(out.value()[0].get(i), 0.0) << i;

  for (const std::vector<double>& bad : {std::vector<double>{0, 150, 20}, {0, 20, 201}}) {
    inputs.value()[1] = make_tensor(DType::kI32, {3}, bad);
    auto failed = run_on_host(*o.executable, inputs.value());
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.message().find("is not a non-decreasing offset within [0, 200]"),
              std::string::npos)
        << failed.message();
  }
}

// Note [GEMM fallbacks]: A off its 16-byte boundary (its map refused) and the output off its
// pairs' boundary each run the mma.sync grouped kernel: the sm_80 build's bits, counted.
TEST(GroupedMmSm90Fallback, RefusedMapsAndUnalignedOutputsRunTheMmaSyncKernel) {
  GroupedCase c{"fallback", 16, 4, DType::kBF16, false, false, 136, 72, {}};
  GraphBuilder b(c.name);
  SymExpr t = b.symbol("t", 1);
  ValueId a = b.input(DType::kBF16, {t, c.K});
  ValueId offs = b.input(DType::kI32, {c.experts});
  std::vector<ValueId> in{a, offs};
  for (int64_t e = 0; e < c.experts; ++e) in.push_back(b.input(DType::kBF16, {c.N, c.K}));
  b.output(b.op(OpKind::kGroupedMm, in, {{"w_layout", int64_t{0}}}));
  const Graph g = b.finish();
  CompileOutcome o = compile_sm90(g);
  ASSERT_TRUE(o.ok()) << o.error;
  ASSERT_EQ(wgmma_kernels(o.executable->plan(), "128x128x64"), 1);
  auto sm80 = testing::compile_for_host(g);
  ASSERT_TRUE(sm80);
  auto inputs = make_random_inputs(g, {{"t", 150}}, 3);
  ASSERT_TRUE(inputs.ok());
  std::vector<double> ends;
  for (int64_t e = 0; e < c.experts; ++e) ends.push_back(static_cast<double>(e < 3 ? 0 : 10 * e));
  inputs.value()[1] = make_tensor(DType::kI32, {c.experts}, ends);
  auto expected = run_on_host(*sm80, inputs.value());
  ASSERT_TRUE(expected.ok()) << expected.message();
  ::testing::internal::CaptureStderr();
  const int64_t tma = runtime_stats().tma_fallback_launches;
  EXPECT_EQ(run_shifted(*o.executable, inputs.value(), 0, false), expected.value()[0].bytes);
  EXPECT_EQ(runtime_stats().tma_fallback_launches - tma, 1);
  const int64_t unaligned = runtime_stats().unaligned_launches;
  EXPECT_EQ(run_shifted(*o.executable, inputs.value(), -1, true), expected.value()[0].bytes);
  EXPECT_EQ(runtime_stats().unaligned_launches - unaligned, 1);
  ::testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace dg
