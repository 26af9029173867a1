// The tensor-core GEMM template with every tile shape the code generator chooses
// (Note [Tile choice] in codegen/tile_choice.cc: one and two B operands), where pipelines go wrong:
// K of at least 4 x BK x stages (every stage reused several times) and not a multiple of BK, M on
// either side of a tile edge, N ragged. Run under whatever DYNGEN_EMU_* modes the environment sets
// (CI runs it under random schedules with fixed seeds, tests/emu/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "codegen/device/dg_types.cuh"
#include "tests/emu/emu_test_util.h"

namespace dg::emu::testing {
namespace {

struct Variant {
  int bm, bn, warps_m, warps_n, stages, nb, bk = 32, slices_k = 1;
  std::string kernel() const {
    return "gemm_" + std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) +
           "_w" + std::to_string(warps_m) + "x" + std::to_string(warps_n) + "_s" +
           std::to_string(stages) + "_b" + std::to_string(nb) +
           (slices_k > 1 ? "_k" + std::to_string(slices_k) : "");
  }
  int threads() const { return 32 * warps_m * warps_n * slices_k; }
};

// The tile table's shapes: BM 32 / 64 / 128 (2 stages at 128), BN 64 or 128 with 64-column warps
// for one B, BN 64 with 32-column warps for two; the small-M tile 32 x 64 with one warp tile and
// BK 64 for one B operand (2 stages), with 32-column warp tiles for two, and both with their warp
// tiles shared over K by 4 and 2 warps (Note [Sliced K]), as the table has them.
const Variant kVariants[] = {
    {32, 64, 1, 1, 3, 1},     {32, 128, 1, 2, 3, 1},       {64, 64, 2, 1, 3, 1},
    {64, 128, 2, 2, 3, 1},    {128, 64, 4, 1, 2, 1},       {128, 128, 4, 2, 2, 1},
    {32, 64, 1, 1, 2, 1, 64}, {32, 64, 1, 2, 3, 2},        {64, 64, 2, 2, 3, 2},
    {128, 64, 4, 2, 2, 2},    {32, 64, 1, 1, 2, 1, 64, 4}, {32, 64, 1, 2, 3, 2, 32, 2},
};

std::string variants_source() {
  std::string s = R"cuda(
#include "dg_device.cuh"
struct Store {
  float* c;
  long long n;
  DG_DEVICE void operator()(long long row, int col, float acc) const { c[row * n + col] = acc; }
};
struct Dual {
  float* c;
  long long n;
  DG_DEVICE void operator()(long long row, int col, float acc0, float acc1) const {
    c[row * n + col] = acc0 - 2.0f * acc1;
  }
};
// C [m][n] = A [m][k] * B^T (B stored [n][k]); with two B operands C = A B0^T - 2 A B1^T.
template <class T, int NB>
DG_DEVICE void variant(const dg_bf16* a, const dg_bf16* b0, const dg_bf16* b1, float* c,
                       long long m, long long n, long long k) {
  const long long m0 = (long long)blockIdx.x * T::BM, n0 = (long long)blockIdx.y * T::BN;
  float acc[NB][T::MT][T::NT][4] = {};
  const dg_bf16* const bs[2] = {b0, b1};
  dg_gemm_mainloop<T, false, false, NB>(acc, a, k, bs, k, m0, m, n0, n, 0, k);
  typedef typename T::Epilogue E;
  float sum[NB][E::MT][E::NT][4];
  dg_gemm_sum_slices<T, false, false, NB>(acc, sum);
  if constexpr (NB == 1) dg_gemm_epilogue<E, 1>(sum, m0, m, n0, n, Store{c, n});
  else dg_gemm_epilogue<E, 2>(sum, m0, m, n0, n, Dual{c, n});
}
)cuda";
  for (const Variant& v : kVariants) {
    const std::string tile = "DgGemmTile<" + std::to_string(v.bm) + ", " + std::to_string(v.bn) +
                             ", " + std::to_string(v.bk) + ", " + std::to_string(v.warps_m) + ", " +
                             std::to_string(v.warps_n) + ", " + std::to_string(v.stages) + ", " +
                             std::to_string(v.slices_k) + ">";
    s += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(v.threads()) + ") " +
         v.kernel() +
         "(const dg_bf16* a, const dg_bf16* b0, const dg_bf16* b1, float* c, long long m, "
         "long long n, long long k) {\n  variant<" +
         tile + ", " + std::to_string(v.nb) + ">(a, b0, b1, c, m, n, k);\n}\nDG_EMU_ENTRY(" +
         v.kernel() + ")\n";
  }
  return s;
}

std::vector<dg_bf16> lcg_bf16(size_t n, uint32_t seed) {
  std::vector<dg_bf16> v(n);
  for (dg_bf16& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = dg_float_to_bf16(static_cast<float>(seed >> 8) / 16777216.0f * 2.0f - 1.0f);
  }
  return v;
}

class EmuGemmVariants : public ::testing::TestWithParam<Variant> {};

TEST_P(EmuGemmVariants, StageReuseKTailAndTileEdges) {
  const Variant v = GetParam();
  const EmuModule& module = test_module(variants_source());
  const long long k = 4LL * v.bk * v.stages + 8;  // > 4 x BK x stages, 8 past a BK multiple
  const long long n = v.bn + 8;                   // two column tiles, the second ragged
  for (long long m : {static_cast<long long>(v.bm) - 1, static_cast<long long>(v.bm) + 1}) {
    const std::vector<dg_bf16> a = lcg_bf16(m * k, 1 + static_cast<uint32_t>(m));
    const std::vector<dg_bf16> b0 = lcg_bf16(n * k, 2), b1 = lcg_bf16(n * k, 3);
    std::vector<float> c(m * n, 777.0f);
    const dg_bf16* pa = a.data();
    const dg_bf16* pb0 = b0.data();
    const dg_bf16* pb1 = b1.data();
    float* pc = c.data();
    long long mm = m, nn = n, kk = k;
    const DgEmuLaunch cfg{static_cast<unsigned>((m + v.bm - 1) / v.bm),
                          static_cast<unsigned>((n + v.bn - 1) / v.bn),
                          1,
                          static_cast<unsigned>(v.threads()),
                          1,
                          1,
                          0};
    ASSERT_EQ(launch(module, v.kernel(), cfg, pa, pb0, pb1, pc, mm, nn, kk), "") << v.kernel();
    long long wrong = 0;
    for (long long i = 0; i < m; ++i) {
      for (long long j = 0; j < n; ++j) {
        double ref = 0.0;
        for (long long q = 0; q < k; ++q) {
          const double x = dg_bf16_to_float(a[i * k + q]);
          ref += x * dg_bf16_to_float(b0[j * k + q]);
          if (v.nb == 2) ref -= 2.0 * x * dg_bf16_to_float(b1[j * k + q]);
        }
        if (!(std::fabs(c[i * n + j] - ref) <= 2e-3)) ++wrong;
      }
    }
    EXPECT_EQ(wrong, 0) << v.kernel() << " m=" << m << " n=" << n << " k=" << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, EmuGemmVariants, ::testing::ValuesIn(kVariants),
                         [](const auto& info) { return info.param.kernel(); });

}  // namespace
}  // namespace dg::emu::testing
