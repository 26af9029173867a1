// Tensor-core primitives under host emulation: ldmatrix against the PTX fragment layout, mma and
// ldmatrix in small GEMMs over ragged M, cp.async groups, and bf16 conversion in a kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "codegen/device/dg_types.cuh"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/tensor_core_kernels.h"

namespace dg::emu::testing {
namespace {

const EmuModule& tensor_core() { return test_module(kTensorCoreKernels); }

TEST(EmuTensorCore, LdmatrixFollowsThePtxLayout) {
  std::vector<unsigned> out(32 * 8);
  unsigned* po = out.data();
  ASSERT_EQ(launch(tensor_core(), "ldmatrix_probe", grid1d(1, 32), po), "");
  // Row i of matrix j comes from the address of lane 8j + i: &m[(8j+i) % 16][((8j+i) / 16) * 8].
  auto element = [](int j, int i, int col) {
    const int lane = 8 * j + i;
    return static_cast<unsigned>(16 * (lane % 16) + (lane / 16) * 8 + col);
  };
  for (int l = 0; l < 32; ++l) {
    for (int j = 0; j < 4; ++j) {
      const unsigned plain = element(j, l / 4, 2 * (l % 4)) | element(j, l / 4, 2 * (l % 4) + 1)
                                                                  << 16;
      const unsigned trans = element(j, 2 * (l % 4), l / 4) | element(j, 2 * (l % 4) + 1, l / 4)
                                                                  << 16;
      EXPECT_EQ(out[8 * l + j], plain) << "lane " << l << " matrix " << j;
      EXPECT_EQ(out[8 * l + 4 + j], trans) << "lane " << l << " matrix " << j << " (trans)";
    }
  }
}

// C = A * B with B[k][n] = b(k, n), in double from the bf16 values.
void check_gemm(const std::vector<dg_bf16>& a, long long m,
                float (*b)(const std::vector<dg_bf16>&, int, int),
                const std::vector<dg_bf16>& bdata, const std::vector<float>& c) {
  for (long long i = 0; i < m; ++i) {
    for (int n = 0; n < kGemmN; ++n) {
      double ref = 0.0;
      for (int k = 0; k < kGemmK; ++k)
        ref += double(dg_bf16_to_float(a[i * kGemmK + k])) * b(bdata, k, n);
      ASSERT_NEAR(c[i * kGemmN + n], ref, 1e-4) << "m=" << m << " row " << i << " col " << n;
    }
  }
}

TEST(EmuTensorCore, GemmWithNMajorWeightsOverRaggedM) {
  const std::vector<dg_bf16> w = random_bf16(kGemmN * kGemmK, 7);
  for (long long m : {1LL, 15LL, 16LL, 17LL, 37LL, 64LL}) {
    const std::vector<dg_bf16> a = random_bf16(m * kGemmK, static_cast<uint32_t>(m));
    std::vector<float> c(m * kGemmN + 1, 123.0f);
    const dg_bf16* pa = a.data();
    const dg_bf16* pw = w.data();
    float* pc = c.data();
    const unsigned blocks = static_cast<unsigned>((m + 15) / 16);
    ASSERT_EQ(launch(tensor_core(), "gemm_nk", grid1d(blocks, 32), pa, pw, pc, m), "");
    check_gemm(
        a, m,
        [](const std::vector<dg_bf16>& wt, int k, int n) {
          return dg_bf16_to_float(wt[n * kGemmK + k]);
        },
        w, c);
    EXPECT_EQ(c[m * kGemmN], 123.0f) << "wrote past row M";
  }
}

TEST(EmuTensorCore, GemmWithKMajorBUsesLdmatrixTrans) {
  const std::vector<dg_bf16> b = random_bf16(kGemmK * kGemmN, 11);
  for (long long m : {3LL, 16LL, 33LL}) {
    const std::vector<dg_bf16> a = random_bf16(m * kGemmK, static_cast<uint32_t>(100 + m));
    std::vector<float> c(m * kGemmN);
    const dg_bf16* pa = a.data();
    const dg_bf16* pb = b.data();
    float* pc = c.data();
    const unsigned blocks = static_cast<unsigned>((m + 15) / 16);
    ASSERT_EQ(launch(tensor_core(), "gemm_kn", grid1d(blocks, 32), pa, pb, pc, m), "");
    check_gemm(
        a, m,
        [](const std::vector<dg_bf16>& bk, int k, int n) {
          return dg_bf16_to_float(bk[k * kGemmN + n]);
        },
        b, c);
  }
}

TEST(EmuTensorCore, CpAsyncGroupsAndZeroFill) {
  alignas(16) float src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> out(3, -5.0f);
  const float* ps = src;
  float* po = out.data();
  ASSERT_EQ(launch(tensor_core(), "cp_async_groups", grid1d(1, 1), ps, po), "");
  EXPECT_EQ(out[0], 1.0f + 4.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 5.0f + 8.0f);
}

TEST(EmuTensorCore, Bf16ConversionInAKernel) {
  std::vector<float> x = {1.0f,   -2.5f,    1.00390625f, 1.01171875f, 3.4e38f,
                          1e-40f, -0.0f,    INFINITY,    -INFINITY,   NAN,
                          0.1f,   65504.0f, 123.456f,    -7.0e-20f};
  const long long n = static_cast<long long>(x.size());
  std::vector<dg_bf16> y(n);
  std::vector<float> z(n);
  std::vector<unsigned> packed(n / 2);
  const float* px = x.data();
  dg_bf16* py = y.data();
  float* pz = z.data();
  unsigned* pp = packed.data();
  ASSERT_EQ(launch(tensor_core(), "bf16_convert", grid1d(1, 32), px, py, pz, pp, n), "");
  // A NaN's payload is not asserted: the host gives 0x7FC0, a GPU's cvt.rn.bf16 0x7FFF (Note
  // [bf16 rounding]); any bf16 NaN is right.
  auto same_bf16 = [](unsigned got, float x) {
    if (std::isnan(x)) return (got & 0x7f80u) == 0x7f80u && (got & 0x7fu) != 0;
    return got == dg_float_to_bf16_bits_rne(x);
  };
  for (long long i = 0; i < n; ++i) {
    EXPECT_TRUE(same_bf16(y[i].bits, x[i])) << x[i] << " -> 0x" << std::hex << y[i].bits;
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(z[i]));
    } else {
      EXPECT_EQ(z[i], dg_bf16_to_float(dg_bf16{dg_float_to_bf16_bits_rne(x[i])})) << x[i];
    }
  }
  for (long long i = 0; i < n / 2; ++i) {
    EXPECT_TRUE(same_bf16(packed[i] & 0xffffu, x[2 * i])) << i;
    EXPECT_TRUE(same_bf16(packed[i] >> 16, x[2 * i + 1])) << i;
  }
}

}  // namespace
}  // namespace dg::emu::testing
