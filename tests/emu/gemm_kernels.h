// Test kernels over the tensor-core GEMM template (codegen/device/dg_gemm_sm80.cuh): every operand
// layout, two B operands with one epilogue, and a K range given at run time.
#pragma once

namespace dg::emu::testing {

inline constexpr int kTileN = 40;  // not a multiple of the block tile's 32 columns
inline constexpr int kTileK = 56;  // not a multiple of BK = 32: the K tail is zero-filled

inline constexpr const char* kGemmKernels = R"cuda(
#include "dg_device.cuh"

#define TN 40
#define TK 56
// 2 x 1 warps, 16 x 32 warp tiles, 3 stages.
typedef DgGemmTile<32, 32, 32, 2, 1, 3> Tile;

struct StoreEpi {
  float* c;
  DG_DEVICE void operator()(long long row, int col, float acc) const { c[row * TN + col] = acc; }
};

struct DualEpi {
  float* c;
  DG_DEVICE void operator()(long long row, int col, float acc0, float acc1) const {
    c[row * TN + col] = acc0 - 2.0f * acc1;
  }
};

// A [M][K] or (AT) [K][M]; B [N][K] or (BKN) [K][N]; C [M][N] f32.
#define GEMM_KERNEL(name, AT, BKN)                                                          \
  extern "C" __global__ void __launch_bounds__(Tile::kThreads)                              \
      name(const dg_bf16* __restrict__ a, const dg_bf16* __restrict__ b, float* __restrict__ c, \
           long long m) {                                                                   \
    dg_gemm_tc<Tile, TN, TK, AT, BKN, 1>(a, AT ? m : TK, b, b, BKN ? TN : TK, m, StoreEpi{c});  \
  }                                                                                         \
  DG_EMU_ENTRY(name)

GEMM_KERNEL(gemm_a_b, false, false)
GEMM_KERNEL(gemm_a_bkn, false, true)
GEMM_KERNEL(gemm_at_b, true, false)
GEMM_KERNEL(gemm_at_bkn, true, true)

// C = A * B0 - 2 A * B1: two B operands sharing the A tile.
extern "C" __global__ void __launch_bounds__(Tile::kThreads)
    gemm_dual(const dg_bf16* __restrict__ a, const dg_bf16* __restrict__ b0,
              const dg_bf16* __restrict__ b1, float* __restrict__ c, long long m) {
  dg_gemm_tc<Tile, TN, TK, false, false, 2>(a, TK, b0, b1, TK, m, DualEpi{c});
}
DG_EMU_ENTRY(gemm_dual)

// C = A[:, k_begin:k_end] * B[k_begin:k_end, :] with the K range known only at run time.
extern "C" __global__ void __launch_bounds__(Tile::kThreads)
    gemm_k_range(const dg_bf16* __restrict__ a, const dg_bf16* __restrict__ b,
                 float* __restrict__ c, long long m, long long k_begin, long long k_end) {
  const long long m0 = (long long)blockIdx.x * Tile::BM, n0 = (long long)blockIdx.y * Tile::BN;
  float acc[1][Tile::MT][Tile::NT][4] = {};
  const dg_bf16* const bs[1] = {b};
  dg_gemm_mainloop<Tile, false, false, 1>(acc, a, TK, bs, TK, m0, m, n0, TN, k_begin, k_end);
  dg_gemm_epilogue<Tile, 1>(acc, m0, m, n0, TN, StoreEpi{c});
}
DG_EMU_ENTRY(gemm_k_range)
)cuda";

}  // namespace dg::emu::testing
