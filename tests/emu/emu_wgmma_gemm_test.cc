// The warp-specialized sm_90a main loop (Note [Warp-specialized main loop] in
// codegen/device/dg_gemm_sm90.cuh) under emulation: TMA boxes over the M and K edges, the stage
// ring's barriers, wgmma consumers, against a double-precision product at token counts around
// every tile and stage boundary. With DYNGEN_EMU_SCHED/ASYNC random (the adversarial ctest
// entries) the ring's handoffs run in random orders and the copies land late or early.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "codegen/device/dg_gemm_sm90.cuh"
#include "codegen/device/dg_tma_sm90.cuh"
#include "runtime/emu/device_headers.h"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/wgmma_gemm_kernels.h"

namespace dg::emu::testing {
namespace {

const EmuModule& gemm_module() { return test_module(kWgmmaGemmKernels); }

template <class Tile>
void check(const char* kernel, long long m, long long n, long long k) {
  SCOPED_TRACE(std::string(kernel) + " M=" + std::to_string(m));
  const std::vector<dg_bf16> a = random_bf16(static_cast<size_t>(m) * k + 8, 3 + m),
                             b = random_bf16(static_cast<size_t>(n) * k, 4);
  DgTensorMap am, bm;
  const dg_u64 ka = static_cast<dg_u64>(k);
  ASSERT_EQ(dg_tensor_map_encode(&am, 2, a.data(), {ka, static_cast<dg_u64>(m)}, 2 * ka,
                                 {64, static_cast<dg_u32>(Tile::BM)}, kDgSwizzle128B),
            nullptr);
  ASSERT_EQ(dg_tensor_map_encode(&bm, 2, b.data(), {ka, static_cast<dg_u64>(n)}, 2 * ka,
                                 {64, static_cast<dg_u32>(Tile::BN)}, kDgSwizzle128B),
            nullptr);
  std::vector<float> c(static_cast<size_t>(m) * n + n, 777.0f);
  float* pc = c.data();
  long long M = m, N = n, K = k;
  const DgEmuLaunch cfg{static_cast<unsigned>((m + Tile::BM - 1) / Tile::BM),
                        static_cast<unsigned>((n + Tile::BN - 1) / Tile::BN),
                        1,
                        Tile::kThreads,
                        1,
                        1,
                        Tile::kSmemBytes};
  ASSERT_EQ(launch(gemm_module(), kernel, cfg, am, bm, pc, M, N, K), "");
  for (long long r = 0; r < m; ++r)
    for (long long col = 0; col < n; ++col) {
      double want = 0;
      for (long long kk = 0; kk < k; ++kk)
        want += double(dg_bf16_to_float(a[r * k + kk])) * dg_bf16_to_float(b[col * k + kk]);
      ASSERT_NEAR(c[r * n + col], want, 1e-4 * (1 + std::fabs(want)))
          << "at (" << r << ", " << col << ")";
    }
  for (long long col = 0; col < n; ++col) ASSERT_EQ(c[m * n + col], 777.0f) << "row M written";
}

// K = 200: four k tiles, the last one 8 wide (zero-filled by the TMA), over three stages, so
// stages are reused; N = 128 and 192 span two and three column blocks (the last one ragged).
TEST(EmuWgmmaGemm, MatchesTheProductAroundEveryBoundary) {
  for (long long m : {1LL, 63LL, 64LL, 65LL, 127LL, 128LL, 129LL, 255LL, 257LL, 1000LL})
    check<DgWgmmaTile<128, 64, 3>>("wgmma_gemm_128x64x3", m, 128, 200);
}

TEST(EmuWgmmaGemm, OneConsumerTwoStagesLongK) {
  for (long long m : {5LL, 64LL, 200LL})
    check<DgWgmmaTile<64, 128, 2>>("wgmma_gemm_64x128x2", m, 192, 520);
}

// The race the adversarial emulation found while this loop was written: one leader thread freed
// the stage for its whole warpgroup, though its wgmma.wait_group retires only its own warp's
// part. As a mutant it must fail under random schedules (it passes the FIFO schedule).
// The kernels over dg_gemm_sm90.cuh with each edit (from, to) made in it; "" when an edit's
// anchor is missing.
std::string mutant_source(const std::vector<std::pair<std::string, std::string>>& edits) {
  std::string header;
  for (const EmbeddedFile& f : device_headers())
    if (std::string(f.name) == "dg_gemm_sm90.cuh") header = f.content;
  for (const auto& [from, to] : edits) {
    const size_t at = header.find(from);
    if (at == std::string::npos) return "";
    header.replace(at, from.size(), to);
  }
  header.replace(header.find("#pragma once"), 12, "");
  std::string source = kWgmmaGemmKernels;
  const std::string include = "#include \"dg_gemm_sm90.cuh\"\n";
  source.replace(source.find(include), include.size(), header);
  return source;
}

TEST(EmuWgmmaGemm, FreeingAStageForOtherWarpsIsCaught) {
  const std::string source = mutant_source(
      {{"dg_mbarrier_init(&empty[s], 4 * Tile::kConsumers);",
        "dg_mbarrier_init(&empty[s], Tile::kConsumers);"},
       {"if (threadIdx.x % 32 == 0 && t > 0)", "if (threadIdx.x % 128 == 0 && t > 0)"}});
  ASSERT_FALSE(source.empty()) << "an anchor of the mutant is gone from dg_gemm_sm90.cuh";
  const EmuModule& mutant = test_module(source);
  typedef DgWgmmaTile<128, 64, 3> Tile;
  const long long m = 256, n = 128, k = 200;
  const std::vector<dg_bf16> a = random_bf16(m * k, 1), b = random_bf16(n * k, 2);
  DgTensorMap am, bm;
  ASSERT_EQ(dg_tensor_map_encode(&am, 2, a.data(), {200, 256}, 400, {64, 128}, kDgSwizzle128B),
            nullptr);
  ASSERT_EQ(dg_tensor_map_encode(&bm, 2, b.data(), {200, 128}, 400, {64, 64}, kDgSwizzle128B),
            nullptr);
  int caught = 0;
  for (const char* seed : {"1", "2", "3"}) {
    const ScopedEnv env({{std::string("DYNGEN_EMU_SCHED"), std::string("random")},
                         {std::string("DYNGEN_EMU_ASYNC"), std::string("random")},
                         {std::string("DYNGEN_EMU_SEED"), std::string(seed)}});
    std::vector<float> c(m * n, 0.0f), ref(m * n, 0.0f);
    float* pc = c.data();
    float* pr = ref.data();
    long long M = m, N = n, K = k;
    const DgEmuLaunch cfg{2, 2, 1, Tile::kThreads, 1, 1, Tile::kSmemBytes};
    ASSERT_EQ(launch(gemm_module(), "wgmma_gemm_128x64x3", cfg, am, bm, pr, M, N, K), "");
    const std::string error = launch(mutant, "wgmma_gemm_128x64x3", cfg, am, bm, pc, M, N, K);
    caught += !error.empty() || c != ref;
  }
  EXPECT_GT(caught, 0) << "the mutant passed three random schedules";
}

// Note [Rank-r staging beside the main loop]: `module`'s staged kernel at M = 200, N = 128, K =
// 200 under a random schedule `seed`; "" when C = A B^T + bias[row] everywhere, else what differs.
std::string staged_run(const EmuModule& module, const char* seed) {
  typedef DgWgmmaTile<128, 64, 3> Tile;
  const long long m = 200, n = 128, k = 200;
  const std::vector<dg_bf16> a = random_bf16(m * k, 5), b = random_bf16(n * k, 6);
  std::vector<float> bias(m);
  for (long long r = 0; r < m; ++r) bias[r] = 1.0f + 0.25f * static_cast<float>(r % 7);
  DgTensorMap am, bm;
  if (dg_tensor_map_encode(&am, 2, a.data(), {200, 200}, 400, {64, 128}, kDgSwizzle128B) ||
      dg_tensor_map_encode(&bm, 2, b.data(), {200, 128}, 400, {64, 64}, kDgSwizzle128B))
    return "tensor map refused";
  const ScopedEnv env({{std::string("DYNGEN_EMU_SCHED"), std::string("random")},
                       {std::string("DYNGEN_EMU_ASYNC"), std::string("random")},
                       {std::string("DYNGEN_EMU_SEED"), std::string(seed)}});
  std::vector<float> c(m * n, 0.0f);
  float* pc = c.data();
  const float* pb = bias.data();
  long long M = m, N = n, K = k;
  const DgEmuLaunch cfg{2, 2, 1, Tile::kThreads, 1, 1, Tile::kSmemBytes + 128 * 4 + 16};
  const std::string error =
      launch(module, "wgmma_gemm_staged_128x64x3", cfg, am, bm, pb, pc, M, N, K);
  if (!error.empty()) return error;
  for (long long r = 0; r < m; ++r)
    for (long long col = 0; col < n; ++col) {
      double want = bias[r];
      for (long long kk = 0; kk < k; ++kk)
        want += double(dg_bf16_to_float(a[r * k + kk])) * dg_bf16_to_float(b[col * k + kk]);
      if (!(std::fabs(c[r * n + col] - want) <= 1e-4 * (1 + std::fabs(want))))  // NaN too
        return "(" + std::to_string(r) + ", " + std::to_string(col) +
               "): " + std::to_string(c[r * n + col]) + " != " + std::to_string(want);
    }
  return "";
}

// The consumers read what the producer's stagers copy only after the `staged` barrier: the kernel
// matches under random schedules, and without the consumers' wait it reads the copies before
// they land under at least one of them.
TEST(EmuWgmmaGemm, EpilogueWaitsForTheStagers) {
  for (const char* seed : {"1", "2", "3"}) EXPECT_EQ(staged_run(gemm_module(), seed), "") << seed;
  const std::string source = mutant_source(
      {{"dg_mbarrier_wait_parity(dg_wgmma_staged_barrier<Tile>(), 0u, \"staged\");", ""}});
  ASSERT_FALSE(source.empty()) << "the staged wait is gone from dg_gemm_sm90.cuh";
  const EmuModule& mutant = test_module(source);
  int caught = 0;
  for (const char* seed : {"1", "2", "3"}) caught += !staged_run(mutant, seed).empty();
  EXPECT_GT(caught, 0) << "the epilogue without its wait passed three random schedules";
}

// Note [Rank-r products on tensor cores]: f32 products through the bf16 split, with operands
// that bf16 cannot hold, within 1e-4 of the sum of |u w| (the split's bound is about 3 x 2^-16;
// bf16 alone, or a split missing one of its three terms, is off by 2^-9 or more).
TEST(EmuWgmmaGemm, RankProductsOnTensorCoresKeepF32Accuracy) {
  const long long m = 100, n = 64;
  std::vector<float> u0(m * 24), u1(m * 24), w0(n * 24), w1(n * 24);
  uint64_t state = 12345;
  auto next = [&]() {  // in (-1, 1), with a full 24-bit significand
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int64_t>(state >> 40) - (1 << 23)) / (1 << 23);
  };
  for (auto* v : {&u0, &u1, &w0, &w1})
    for (float& x : *v) x = next();
  std::vector<float> c(m * n * 2, 777.0f);
  typedef DgWgmmaTile<128, 64, 2> Tile;
  typedef DgWgmmaRank<Tile, 2, 2> Rank;
  const DgEmuLaunch cfg{1, 1, 1, Tile::kThreads, 1, 1, Rank::kOffset + Rank::kBytes};
  float* pc = c.data();
  const float *p0 = u0.data(), *p1 = w0.data(), *p2 = u1.data(), *p3 = w1.data();
  long long M = m, N = n;
  ASSERT_EQ(launch(gemm_module(), "wgmma_rank_products", cfg, p0, p1, p2, p3, pc, M, N), "");
  for (long long r = 0; r < m; ++r)
    for (long long col = 0; col < n; ++col)
      for (int q = 0; q < 2; ++q) {
        const std::vector<float>& u = q ? u1 : u0;
        const std::vector<float>& w = q ? w1 : w0;
        double want = 0, scale = 0;
        for (int j = 0; j < 24; ++j) {
          want += double(u[r * 24 + j]) * w[col * 24 + j];
          scale += std::fabs(double(u[r * 24 + j]) * w[col * 24 + j]);
        }
        ASSERT_NEAR(c[(r * n + col) * 2 + q], want, 1e-4 * scale)
            << "product " << q << " at (" << r << ", " << col << ")";
      }
}

}  // namespace
}  // namespace dg::emu::testing
