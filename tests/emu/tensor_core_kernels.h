// Tensor-core, cp.async and bf16 test kernels (see basic_kernels.h for the conventions).
#pragma once

namespace dg::emu::testing {

inline constexpr int kGemmN = 16;
inline constexpr int kGemmK = 32;

inline constexpr const char* kTensorCoreKernels = R"cuda(
#include "dg_device.cuh"

#define GEMM_N 16
#define GEMM_K 32

// Loads a 16 x GEMM_K tile of A (rows >= M zero-filled) into shared memory with cp.async.
__device__ __forceinline__ void load_a_tile(dg_bf16 (*as)[GEMM_K + 8], const dg_bf16* a,
                                            long long row0, long long m, unsigned lane) {
  for (unsigned c = lane; c < 16 * GEMM_K / 8; c += 32) {
    const unsigned r = c / (GEMM_K / 8), col = (c % (GEMM_K / 8)) * 8;
    const bool inside = row0 + r < m;
    dg_cp_async_16_zfill(&as[r][col], a + (inside ? row0 + r : 0) * GEMM_K + col, inside);
  }
}

// Writes a warp's two 16x8 accumulators (Note [mma fragment layouts]) where row < M.
__device__ __forceinline__ void store_c(float* c, const float (&acc)[2][4], long long row0,
                                        long long m, unsigned lane) {
  const unsigned g = lane / 4, t = lane % 4;
  for (int nt = 0; nt < 2; ++nt) {
    for (int i = 0; i < 4; ++i) {
      const long long row = row0 + g + 8 * (i / 2);
      if (row < m) c[row * GEMM_N + nt * 8 + 2 * t + (i % 2)] = acc[nt][i];
    }
  }
}

// C[M][16] = A[M][32] * W[16][32]^T, W stored n-major like a linear layer's weight. One warp per
// 16 rows; M is dynamic.
extern "C" __global__ void __launch_bounds__(32) gemm_nk(const dg_bf16* __restrict__ a,
                                                         const dg_bf16* __restrict__ w,
                                                         float* __restrict__ c, long long m) {
  __shared__ __align__(16) dg_bf16 as[16][GEMM_K + 8];
  __shared__ __align__(16) dg_bf16 ws[GEMM_N][GEMM_K + 8];
  const unsigned lane = threadIdx.x;
  const long long row0 = (long long)blockIdx.x * 16;
  load_a_tile(as, a, row0, m, lane);
  for (unsigned i = lane; i < GEMM_N * GEMM_K / 8; i += 32) {
    const unsigned r = i / (GEMM_K / 8), col = (i % (GEMM_K / 8)) * 8;
    dg_cp_async_16(&ws[r][col], w + r * GEMM_K + col);
  }
  dg_cp_async_commit();
  dg_cp_async_wait<0>();
  __syncthreads();
  float acc[2][4] = {};
  for (int k0 = 0; k0 < GEMM_K; k0 += 16) {
    dg_u32 af[4], bf[4];
    dg_ldmatrix_x4(af, &as[lane % 16][k0 + (lane / 16) * 8]);
    dg_ldmatrix_x4(bf, &ws[(lane / 16) * 8 + lane % 8][k0 + ((lane / 8) % 2) * 8]);
    const dg_u32 b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
    dg_mma_m16n8k16_bf16(acc[0], af, b0, acc[0]);
    dg_mma_m16n8k16_bf16(acc[1], af, b1, acc[1]);
  }
  store_c(c, acc, row0, m, lane);
}
DG_EMU_ENTRY(gemm_nk)

// C[M][16] = A[M][32] * B[32][16], B stored k-major: the B fragments come from ldmatrix.trans.
extern "C" __global__ void __launch_bounds__(32) gemm_kn(const dg_bf16* __restrict__ a,
                                                         const dg_bf16* __restrict__ b,
                                                         float* __restrict__ c, long long m) {
  __shared__ __align__(16) dg_bf16 as[16][GEMM_K + 8];
  __shared__ __align__(16) dg_bf16 bs[GEMM_K][GEMM_N + 8];
  const unsigned lane = threadIdx.x;
  const long long row0 = (long long)blockIdx.x * 16;
  load_a_tile(as, a, row0, m, lane);
  for (unsigned i = lane; i < GEMM_K * GEMM_N / 8; i += 32) {
    const unsigned r = i / (GEMM_N / 8), col = (i % (GEMM_N / 8)) * 8;
    dg_cp_async_16(&bs[r][col], b + r * GEMM_N + col);
  }
  dg_cp_async_commit();
  dg_cp_async_wait_all();
  __syncthreads();
  float acc[2][4] = {};
  for (int k0 = 0; k0 < GEMM_K; k0 += 16) {
    dg_u32 af[4], bf[4];
    dg_ldmatrix_x4(af, &as[lane % 16][k0 + (lane / 16) * 8]);
    dg_ldmatrix_x4_trans(bf, &bs[k0 + ((lane / 8) % 2) * 8 + lane % 8][(lane / 16) * 8]);
    const dg_u32 b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
    dg_mma_m16n8k16_bf16(acc[0], af, b0, acc[0]);
    dg_mma_m16n8k16_bf16(acc[1], af, b1, acc[1]);
  }
  store_c(c, acc, row0, m, lane);
}
DG_EMU_ENTRY(gemm_kn)

// The registers ldmatrix.x4 (and .trans) return for m[r][c] = 16 r + c, lane l pointing at
// &m[l % 16][(l / 16) * 8]: 8 words per lane.
extern "C" __global__ void ldmatrix_probe(unsigned* __restrict__ out) {
  __shared__ __align__(16) dg_u16 m[16][16];
  const unsigned lane = threadIdx.x;
  for (unsigned i = lane; i < 256; i += 32) m[i / 16][i % 16] = (dg_u16)i;
  __syncwarp();
  dg_u32 r[4], rt[4];
  dg_ldmatrix_x4(r, &m[lane % 16][(lane / 16) * 8]);
  dg_ldmatrix_x4_trans(rt, &m[lane % 16][(lane / 16) * 8]);
  for (int j = 0; j < 4; ++j) {
    out[lane * 8 + j] = r[j];
    out[lane * 8 + 4 + j] = rt[j];
  }
}
DG_EMU_ENTRY(ldmatrix_probe)

// cp.async groups retire in order; a zero-fill copy writes zeros. One thread.
extern "C" __global__ void cp_async_groups(const float* __restrict__ src, float* __restrict__ out) {
  __shared__ __align__(16) float stage[2][4];
  for (int i = 0; i < 4; ++i) stage[0][i] = stage[1][i] = -1.0f;
  dg_cp_async_16(&stage[0][0], src);
  dg_cp_async_commit();
  dg_cp_async_16_zfill(&stage[1][0], src + 4, false);
  dg_cp_async_commit();
  dg_cp_async_wait<1>();
  out[0] = stage[0][0] + stage[0][3];
  dg_cp_async_wait<0>();
  out[1] = stage[1][0] + stage[1][3];
  dg_cp_async_16(&stage[1][0], src + 4);
  dg_cp_async_wait_all();
  out[2] = stage[1][0] + stage[1][3];
}
DG_EMU_ENTRY(cp_async_groups)

// float -> bf16 conversions in a kernel.
extern "C" __global__ void bf16_convert(const float* __restrict__ x, dg_bf16* __restrict__ y,
                                        float* __restrict__ z, unsigned* __restrict__ packed,
                                        long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = dg_float_to_bf16(x[i]);
    z[i] = dg_round_to_bf16(x[i]);
  }
  if (i < n / 2) packed[i] = dg_float2_to_bf16x2(x[2 * i], x[2 * i + 1]);
}
DG_EMU_ENTRY(bf16_convert)
)cuda";

}  // namespace dg::emu::testing
