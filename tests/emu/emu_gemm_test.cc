// The tensor-core GEMM template under host emulation: ragged M (0, 1, tile edges), N and K that
// are no tile multiple, all four operand layouts, two B operands, a run-time K range, and
// operands that are not 16-byte aligned (plain loads instead of cp.async).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "codegen/device/dg_types.cuh"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/gemm_kernels.h"

namespace dg::emu::testing {
namespace {

const EmuModule& gemm_module() { return test_module(kGemmKernels); }

float at(const std::vector<dg_bf16>& v, size_t i) { return dg_bf16_to_float(v[i]); }

// At least one block: with M = 0 the kernel's own guard must keep it from writing.
DgEmuLaunch grid_for(long long m) {
  const unsigned blocks = m == 0 ? 1u : static_cast<unsigned>((m + 31) / 32);
  return DgEmuLaunch{blocks, (kTileN + 31) / 32, 1, 64, 1, 1, 0};
}

// A (M x K) and B (K x N) in the layouts the kernel name says; checks C against a double sum.
void run_layout(const char* kernel, bool at_layout, bool bkn, long long m, int k_lo = 0,
                int k_hi = kTileK, bool offset_by_one = false) {
  // One spare element in front: an offset of one bf16 makes every operand 2 mod 16 bytes.
  std::vector<dg_bf16> abuf = random_bf16(m * kTileK + 8, static_cast<uint32_t>(m) + 1);
  std::vector<dg_bf16> bbuf = random_bf16(kTileN * kTileK + 8, 99);
  const dg_bf16* a = abuf.data() + (offset_by_one ? 1 : 0);
  const dg_bf16* b = bbuf.data() + (offset_by_one ? 1 : 0);
  std::vector<float> c(m * kTileN + kTileN, 777.0f);
  float* pc = c.data();
  std::string err;
  if (k_lo != 0 || k_hi != kTileK) {
    long long lo = k_lo, hi = k_hi;
    err = launch(gemm_module(), kernel, grid_for(m), a, b, pc, m, lo, hi);
  } else {
    err = launch(gemm_module(), kernel, grid_for(m), a, b, pc, m);
  }
  ASSERT_EQ(err, "") << kernel;
  for (long long i = 0; i < m; ++i) {
    for (int n = 0; n < kTileN; ++n) {
      double ref = 0.0;
      for (int k = k_lo; k < k_hi; ++k) {
        const size_t ai = at_layout ? k * m + i : i * kTileK + k;
        const size_t bi = bkn ? k * kTileN + n : n * kTileK + k;
        ref += double(dg_bf16_to_float(a[ai])) * dg_bf16_to_float(b[bi]);
      }
      ASSERT_NEAR(c[i * kTileN + n], ref, 1e-4) << kernel << " m=" << m << " at " << i << "," << n;
    }
  }
  for (int n = 0; n < kTileN; ++n) EXPECT_EQ(c[m * kTileN + n], 777.0f) << kernel << ": row M";
}

TEST(EmuGemm, RowMajorTimesLinearWeightOverRaggedM) {
  for (long long m : {0LL, 1LL, 2LL, 31LL, 32LL, 33LL, 70LL})
    run_layout("gemm_a_b", false, false, m);
}

TEST(EmuGemm, KMajorBUsesLdmatrixTrans) {
  for (long long m : {1LL, 33LL}) run_layout("gemm_a_bkn", false, true, m);
}

TEST(EmuGemm, TransposedAOperand) {
  // A stored [K][M]: M must be a multiple of 8 (its contiguous extent).
  for (long long m : {8LL, 40LL}) {
    run_layout("gemm_at_b", true, false, m);
    run_layout("gemm_at_bkn", true, true, m);
  }
}

TEST(EmuGemm, UnalignedOperandsTakePlainLoads) {
  // Every layout (the transposed ones with blocks on the tile edge) and a K range with a residue
  // through the one-stage unaligned loop (Note [Lean main loop]).
  for (long long m : {1LL, 37LL}) {
    run_layout("gemm_a_b", false, false, m, 0, kTileK, true);
    run_layout("gemm_a_bkn", false, true, m, 0, kTileK, true);
  }
  for (long long m : {8LL, 40LL}) {
    run_layout("gemm_at_b", true, false, m, 0, kTileK, true);
    run_layout("gemm_at_bkn", true, true, m, 0, kTileK, true);
  }
  run_layout("gemm_k_range", false, false, 33, 8, 48, true);
  run_layout("gemm_k_range", false, false, 5, 16, 16, true);  // empty range: zeros
}

TEST(EmuGemm, KRangeGivenAtRunTime) {
  run_layout("gemm_k_range", false, false, 33, 8, 48);
  run_layout("gemm_k_range", false, false, 5, 16, 16);  // empty range: zeros
}

TEST(EmuGemm, TwoBOperandsShareTheATile) {
  const long long m = 45;
  std::vector<dg_bf16> a = random_bf16(m * kTileK, 5);
  std::vector<dg_bf16> b0 = random_bf16(kTileN * kTileK, 6), b1 = random_bf16(kTileN * kTileK, 7);
  std::vector<float> c(m * kTileN, 0.0f);
  const dg_bf16 *pa = a.data(), *p0 = b0.data(), *p1 = b1.data();
  float* pc = c.data();
  ASSERT_EQ(launch(gemm_module(), "gemm_dual", grid_for(m), pa, p0, p1, pc, m), "");
  for (long long i = 0; i < m; ++i) {
    for (int n = 0; n < kTileN; ++n) {
      double g = 0.0, u = 0.0;
      for (int k = 0; k < kTileK; ++k) {
        g += double(at(a, i * kTileK + k)) * at(b0, n * kTileK + k);
        u += double(at(a, i * kTileK + k)) * at(b1, n * kTileK + k);
      }
      ASSERT_NEAR(c[i * kTileN + n], g - 2.0 * u, 2e-4) << i << "," << n;
    }
  }
}

}  // namespace
}  // namespace dg::emu::testing
