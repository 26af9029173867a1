// Note [sm_90a GEMMs]: the sm_90a source's GEMMs (wgmma fed by TMA, codegen/emit_wgmma.cc) run
// under host emulation against the reference at token counts around every tile and stage
// boundary, and a tensor map the driver would refuse (an operand off a 16-byte boundary) runs
// the mma.sync fallback, counted and logged once, with the mma.sync build's results (Note [Tensor
// maps]).
#include <gtest/gtest.h>

#include "ir/text_format.h"
#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "tests/codegen/shifted_input.h"
#include "tests/common/fixtures.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

using testing::fixture_text;
using testing::parse_or_fail;
using testing::replace_in_shapes;
using testing::resized_seed;

// A SwiGLU MLP without adapters: gate and up share A (two B operands, one kernel), the down
// projection has N = 136 (a partial column tile) and K = 192; the first K = 200 ends in a partial
// 64-wide k tile.
constexpr const char* kSwigluMlp = R"(graph @swiglu_mlp
sym n in [0, inf] div 1
input %x: bf16[n, 200]
input %wg: bf16[192, 200]
input %wu: bf16[192, 200]
input %wd: bf16[136, 192]
%g: bf16[n, 192] = linear(%x, %wg)
%u: bf16[n, 192] = linear(%x, %wu)
%a: bf16[n, 192] = silu(%g)
%h: bf16[n, 192] = mul(%a, %u)
%y: bf16[n, 136] = linear(%h, %wd)
output %y
)";

// The sm_90a source under the host emulation, with waves of `wave_ctas` blocks.
CompileRequest sm90_request(int64_t wave_ctas) {
  CompileRequest req;
  req.target = "host";
  req.source_arch = "sm_90a";
  req.wave_ctas = wave_ctas;
  req.cache_dir = testing::shared_cache_dir("dyngen-wgmma-cache");
  return req;
}

using Compiled = testing::CompiledGraph;

// Waves of 4 blocks put both wgmma tiles at small M: with two or three column tiles, 64 x 128
// from M = 65 and 128 x 128 from M = 129 (for gate/up the wide tile, Note [Wide gate/up tile],
// which fills a wave as soon as 128 x 64 would here); mma.sync below.
Compiled compile_sm90(const std::set<std::string>& disabled = {}) {
  CompileRequest req = sm90_request(4);
  req.disabled_passes = disabled;
  return testing::compile_text(kSwigluMlp, req);
}

// The fallback's output against the mma.sync build's (output 0, bf16). That build runs the
// small-M tile at every M here (its range ends where the default tile fills two waves of 132
// blocks), whose warps share each warp tile's K (Note [Sliced K] in
// codegen/device/dg_gemm_tile_sm80.cuh): an f32 sum in another order, so a bf16 result may move
// by its last bit where the sum lands near a rounding boundary. Within two of those (2^-7) of the
// tensor's scale; a wrong row, column or k tile misses by far more.
void expect_same_results(const std::vector<uint8_t>& fallback, const HostTensor& mma_sync,
                         const std::string& where) {
  HostTensor actual = mma_sync;
  actual.bytes = fallback;
  testing::expect_within_scale({actual}, {mma_sync}, 1.0 / 128, where);
}

int count_with(const KernelPlan& plan, const std::string& text) {
  int n = 0;
  for (const KernelLaunch& k : plan.kernels) n += k.summary.find(text) != std::string::npos;
  return n;
}

// `exe` (g's sm_90a source) against the reference at each token count of `symbol`, inputs seeded
// with seed_base + s; no tensor map may be refused on the way.
void expect_matches_reference(const Graph& g, const Executable& exe, const std::string& symbol,
                              const std::vector<int64_t>& token_counts, uint64_t seed_base) {
  const int64_t fallbacks = runtime_stats().tma_fallback_launches;
  for (int64_t s : token_counts) {
    testing::expect_matches_reference_at(g, exe, symbol, s, seed_base + s,
                                         ToleranceMode::kTensorScale);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(runtime_stats().tma_fallback_launches, fallbacks) << "aligned maps were refused";
}

TEST(WgmmaGemm, Sm90SourceHoldsWgmmaTilesAndTheirFallbacks) {
  Compiled c = compile_sm90();
  ASSERT_TRUE(c.exe);
  const KernelPlan& plan = c.exe->plan();
  EXPECT_EQ(count_with(plan, "[wgmma 128x64x64"), 0);
  EXPECT_EQ(count_with(plan, "[wgmma 128x128x64"), 2);  // gate/up (two B operands) and down
  EXPECT_EQ(count_with(plan, "[wgmma 64x128x64"), 2);
  EXPECT_EQ(launch_sites(plan), 2u);
  int maps = 0, fallbacks = 0;
  for (const KernelLaunch& k : plan.kernels) {
    maps += static_cast<int>(k.tensor_maps.size());
    fallbacks += k.fallback;
    if (!k.tensor_maps.empty()) {
      EXPECT_GT(k.shared_bytes, 48 * 1024) << k.name;
    }
  }
  EXPECT_EQ(maps, 2 * 3 + 2 * 2);  // gate/up: A and two B; down: A and B; two tiles each
  EXPECT_EQ(fallbacks, 2);         // one per GEMM, for every M (Note [GEMM fallbacks])
  EXPECT_NE(plan.source.find("dg_wgmma_mainloop"), std::string::npos);

  Compiled off = compile_sm90({"wgmma"});
  ASSERT_TRUE(off.exe);
  EXPECT_EQ(count_with(off.exe->plan(), "[wgmma"), 0);
  EXPECT_EQ(off.exe->plan().source.find("dg_wgmma_mainloop"), std::string::npos);
}

// Gate/up with N = 512 (K = 200, a partial k tile) in waves of 16 blocks: 128 x 64 (eight column
// tiles) from M = 129 to 384 and the wide 128 x 128 (four, Note [Wide gate/up tile]) from 385;
// mma.sync below 129.
TEST(WgmmaGemm, WideGateUpTileMatchesTheReferenceAroundItsBoundaries) {
  CompileRequest req = sm90_request(16);
  Compiled c = testing::compile_text(replace_in_shapes(kSwigluMlp, {{"192", "512"}}), req);
  ASSERT_TRUE(c.exe);
  const KernelPlan& plan = c.exe->plan();
  EXPECT_EQ(count_with(plan, "[wgmma 128x128x64, 4 stages, for M >= 385]"), 1);
  EXPECT_EQ(count_with(plan, "[wgmma 128x64x64, 4 stages, for 129 <= M <= 384]"), 1);
  expect_matches_reference(c.graph, *c.exe, "n",
                           {0, 1, 128, 129, 130, 255, 256, 257, 383, 384, 385, 386, 513, 1000}, 40);
}

TEST(WgmmaGemm, MatchesTheReferenceAroundEveryTileBoundary) {
  Compiled c = compile_sm90();
  ASSERT_TRUE(c.exe);
  expect_matches_reference(c.graph, *c.exe, "n", {0, 1, 63, 64, 65, 127, 128, 129, 255, 257, 1000},
                           90);
}

TEST(WgmmaGemm, RefusedTensorMapRunsTheFallbackCountedAndLoggedOnce) {
  Compiled c = compile_sm90();
  ASSERT_TRUE(c.exe);
  const int64_t n = 200;  // the 128 x 128 wgmma tile
  auto inputs = make_random_inputs(c.graph, {{"n", n}}, 7);
  ASSERT_TRUE(inputs.ok()) << inputs.message();
  auto reference = run_on_host(*c.exe, inputs.value());
  ASSERT_TRUE(reference.ok()) << reference.message();

  const int64_t before = runtime_stats().tma_fallback_launches;
  ::testing::internal::CaptureStderr();
  const std::vector<uint8_t> first = run_with_shifted_input(*c.exe, inputs.value(), 0);
  const std::vector<uint8_t> second = run_with_shifted_input(*c.exe, inputs.value(), 0);
  const std::string log = ::testing::internal::GetCapturedStderr();
  // Only the gate/up GEMM reads x; the down projection's maps still encode.
  EXPECT_EQ(runtime_stats().tma_fallback_launches - before, 2);
  // One line for the refused map; the fallback's own unaligned-operand line is the other warning
  // (Note [Unaligned operands]).
  const std::string tma = "cannot read its operands with TMA";
  size_t lines = 0;
  for (size_t at = log.find(tma); at != std::string::npos; at = log.find(tma, at + 1)) ++lines;
  EXPECT_EQ(lines, 1u) << log;
  // The fallback runs an mma.sync kernel, as the sm_90a source without wgmma does: the same
  // results, and the same bits call after call.
  Compiled off = compile_sm90({"wgmma"});
  ASSERT_TRUE(off.exe);
  auto mma_sync = run_on_host(*off.exe, inputs.value());
  ASSERT_TRUE(mma_sync.ok()) << mma_sync.message();
  expect_same_results(first, mma_sync.value()[0], "n=200");
  EXPECT_EQ(second, first);
}

// Note [GEMM fallbacks]: x off its 16-byte boundary refuses the gate/up GEMM's tensor maps and y
// off its pairs' boundary sends the down projection to its fallback too, at every M (the fallback
// is one kernel for all of them); the results are the mma.sync build's at each tile and stage
// boundary.
TEST(WgmmaGemm, FallbacksMatchTheMmaSyncBuildAroundEveryTileBoundary) {
  Compiled c = compile_sm90();
  ASSERT_TRUE(c.exe);
  Compiled off = compile_sm90({"wgmma"});
  ASSERT_TRUE(off.exe);
  ::testing::internal::CaptureStderr();
  for (int64_t n : {1, 63, 64, 65, 127, 128, 129, 255, 257, 1000}) {
    auto inputs = make_random_inputs(c.graph, {{"n", n}}, 11);
    ASSERT_TRUE(inputs.ok()) << inputs.message();
    auto mma_sync = run_on_host(*off.exe, inputs.value());
    ASSERT_TRUE(mma_sync.ok()) << mma_sync.message();
    const int64_t tma = runtime_stats().tma_fallback_launches;
    const int64_t unaligned = runtime_stats().unaligned_launches;
    expect_same_results(run_shifted(*c.exe, inputs.value(), 0, true), mma_sync.value()[0],
                        "n=" + std::to_string(n));
    // Where the gate/up GEMM runs wgmma; the down projection's output is off at every M.
    EXPECT_EQ(runtime_stats().tma_fallback_launches - tma, n >= 65 ? 1 : 0) << n;
    EXPECT_GE(runtime_stats().unaligned_launches - unaligned, 1) << n;
  }
  ::testing::internal::GetCapturedStderr();
}

// The seed's LoRA expert forward on sm_90a: both GEMMs carry rank-r products, staged for the
// wgmma epilogue (dg_wgmma_epilogue_rank). Waves of 32 blocks put the 128-row tiles from M = 129
// (gate/up: 128 x 64 up to 384, the wide 128 x 128 from 385, Note [Wide gate/up tile]) and the
// down projection's 64-row tile at 65 <= M <= 128; mma.sync below.
TEST(WgmmaGemm, SeedForwardWithStagedRankProductsMatchesTheReference) {
  // The fixture at its own sizes, its symbol's range widened to [0, inf].
  const Graph g = resized_seed("seed_expert_mlp.dgir", 2048, 1024, 16);
  CompileOutcome o = compile_graph(g, sm90_request(32));
  ASSERT_TRUE(o.ok()) << o.error;
  const KernelPlan& plan = o.executable->plan();
  EXPECT_EQ(count_with(plan, "[wgmma 128x"), 3);
  EXPECT_EQ(count_with(plan, "[wgmma 128x64x64"), 1);
  EXPECT_EQ(count_with(plan, "[wgmma 64x"), 1);
  EXPECT_NE(plan.source.find("dg_wgmma_epilogue_rank"), std::string::npos);
  expect_matches_reference(g, *o.executable, "s77",
                           {0, 1, 63, 64, 65, 127, 128, 129, 255, 257, 384, 385, 386, 1000}, 300);
}

// Runs `g` compiled for sm_90a (waves of `wave_ctas` blocks) at each token count of `symbol`
// against the reference (expect_matches_reference). The plan must hold `n_major` wgmma kernels
// reading B N-major, and a wgmma GEMM over two K segments where `k_segments`.
void check_sm90_token_counts(const Graph& g, int64_t wave_ctas, const std::string& symbol,
                             const std::vector<int64_t>& token_counts, int n_major,
                             bool k_segments) {
  CompileOutcome o = compile_graph(g, sm90_request(wave_ctas));
  ASSERT_TRUE(o.ok()) << o.error;
  EXPECT_EQ(count_with(o.executable->plan(), ", B N-major"), n_major);
  EXPECT_EQ(
      o.executable->plan().source.find("dg_wgmma_mainloop_producer<Tile, 2>") != std::string::npos,
      k_segments);
  expect_matches_reference(g, *o.executable, symbol, token_counts, 500);
}

// dy @ W with W stored [K][N] (the backward's dgrad): B N-major, N = 200 (the last 64-column box
// past N), K = 192, an epilogue reading another input. Waves of 4 blocks: 64 x 128 from M = 65,
// 128 x 128 from 129.
constexpr const char* kDgrad = R"(graph @dgrad
sym n in [0, inf] div 1
input %dy: bf16[n, 192]
input %w: bf16[192, 200]
input %h: bf16[n, 200]
%dx: bf16[n, 200] = matmul(%dy, %w)
%y: bf16[n, 200] = mul(%dx, %h)
output %y
)";

TEST(WgmmaGemm, NMajorBMatchesTheReferenceAroundEveryTileBoundary) {
  ParseResult parsed = parse_graph_text(kDgrad);
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  check_sm90_token_counts(parsed.graph, 4, "n", {0, 1, 63, 64, 65, 127, 128, 129, 255, 257, 1000},
                          2, false);
}

// The 320/200 r = 64 LoRA backward on wgmma with B N-major: the dgrad of the down projection
// (N = 200, K = 320, a staged rank-r product) and dx over the gate and up segments (K = 200 each:
// every segment ends in a partial k tile, whose overhang must read zeros).
TEST(WgmmaGemm, RaggedLoraBackwardMatchesTheReference) {
  check_sm90_token_counts(resized_seed("seed_expert_mlp_backward.dgir", 320, 200, 64), 4, "s77",
                          {0, 1, 63, 64, 65, 127, 128, 129, 255, 257, 1000}, 4, true);
}

// Ranks that are not a multiple of 16 on the tensor-core rank-r epilogue (Note [Rank-r products on
// tensor cores]): r = 8 pads each product's one k16 step with zeros, r = 40 takes three steps a
// product, the two products' hi and lo parts twelve steps over three 64-wide k tiles.
TEST(WgmmaGemm, RaggedRanksOnTheTensorCoreEpilogueMatchTheReference) {
  for (int64_t rank : {8, 40}) {
    SCOPED_TRACE("r = " + std::to_string(rank));
    const Graph g = resized_seed("seed_expert_mlp.dgir", 320, 200, rank);
    CompileOutcome o = compile_graph(g, sm90_request(4));
    ASSERT_TRUE(o.ok()) << o.error;
    EXPECT_NE(o.executable->plan().source.find("dg_wgmma_epilogue_rank<Tile, 2, " +
                                               std::to_string((rank + 15) / 16) + ">"),
              std::string::npos);
    expect_matches_reference(g, *o.executable, "s77", {1, 64, 65, 128, 129, 257}, 900 + rank);
  }
}

// The seed's backward at OLMoE sizes: waves of 16 blocks put the down projection's dgrad
// (N = 1024, eight column tiles) on 64 x 128 wgmma from M = 65 and on 128 x 128 from M = 129, and
// dx over two K segments (N = 2048) on 128 x 128 from M = 1.
TEST(WgmmaGemm, SeedBackwardMatchesTheReference) {
  check_sm90_token_counts(resized_seed("seed_expert_mlp_backward.dgir", 2048, 1024, 16), 16, "s77",
                          {1, 64, 65, 129, 257}, 3, true);
}

// The Phi-3.5-MoE expert (hidden 4096, ffn 6400, r = 16) at its own sizes: K = 4096, 6400 and
// two segments of 6400 walk the 4-stage ring 16 to 100 times, and N = 6400 is 50 column tiles.
// Waves of 64 blocks put the 64 x 128 wgmma tiles at 65 <= M <= 128 and the 128-row tiles from
// M = 129 (the forward's gate/up GEMM, 100 column tiles of 64, from M = 1, and on the wide tile's
// 50 of 128 from M = 129); mma.sync below. With
// the H200's 132 the boundaries lie at 128/129, 256/257 and 512/513, which `dyngen run --arch
// sm_90a` covers at real sizes (too slow for the suite: 15 s per 64 tokens here).
constexpr std::initializer_list<int64_t> kPhiTokenCounts = {0, 1, 64, 65, 128, 129, 200};

TEST(WgmmaGemm, PhiExpertForwardMatchesTheReference) {
  const Graph g = resized_seed("seed_expert_mlp.dgir", 4096, 6400, 16);
  CompileOutcome o = compile_graph(g, sm90_request(64));
  ASSERT_TRUE(o.ok()) << o.error;
  const KernelPlan& plan = o.executable->plan();
  EXPECT_EQ(count_with(plan, "[wgmma 128x64x64"), 1);   // gate/up
  EXPECT_EQ(count_with(plan, "[wgmma 128x128x64"), 2);  // gate/up's wide tile, down
  EXPECT_EQ(count_with(plan, "[wgmma 64x128x64"), 1);
  expect_matches_reference(g, *o.executable, "s77", kPhiTokenCounts, 700);
}

TEST(WgmmaGemm, PhiExpertBackwardMatchesTheReference) {
  check_sm90_token_counts(resized_seed("seed_expert_mlp_backward.dgir", 4096, 6400, 16), 64, "s77",
                          kPhiTokenCounts, 4, true);
}

// The DBRX-style expert backward (tests/fixtures/dbrx_expert_backward.dgir: 4 experts, weights
// as strided slices of fused parameters, no LoRA) at hidden 192 and ffn 160, so that both of its
// GEMMs reach wgmma: grad_h = g @ w2_e^T (B K-major, N = 160) and dx over the gate and up
// segments (B N-major, N = 192, K = 160 each), every map starting at expert 2's slice.
Graph dbrx_backward(int64_t hidden, int64_t ffn) {
  return parse_or_fail(replace_in_shapes(fixture_text("dbrx_expert_backward.dgir"),
                                         {{"384", "Q"},
                                          {"96", std::to_string(ffn)},
                                          {"64", std::to_string(hidden)},
                                          {"Q", std::to_string(4 * ffn)}}));
}

TEST(WgmmaGemm, DbrxExpertBackwardMatchesTheReference) {
  check_sm90_token_counts(dbrx_backward(192, 160), 4, "s", {2, 63, 64, 65, 129, 257, 1000}, 2,
                          true);
}

}  // namespace
}  // namespace dg
