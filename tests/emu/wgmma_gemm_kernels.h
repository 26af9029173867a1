// Kernels over the sm_90a main loop (codegen/device/dg_gemm_sm90.cuh); see basic_kernels.h for
// the conventions.
#pragma once

namespace dg::emu::testing {

inline constexpr const char* kWgmmaGemmKernels = R"cuda(
#include "dg_device.cuh"
#include "dg_gemm_sm90.cuh"

// C[M][N] = A[M][K] B[N][K]^T in f32 through the warp-specialized loop: grid (ceil(M / BM),
// ceil(N / BN)), Tile::kThreads threads, Tile::kSmemBytes of dynamic shared memory.
#define WGMMA_GEMM_KERNEL(NAME, TILE_M, TILE_N, STAGES)                                                  \
  extern "C" __global__ void __launch_bounds__(DgWgmmaTile<TILE_M, TILE_N, STAGES>::kThreads, 1)         \
      NAME(const __grid_constant__ DgTensorMap a_map, const __grid_constant__ DgTensorMap b_map, \
           float* c, long long M, long long N, long long K) {                                    \
    typedef DgWgmmaTile<TILE_M, TILE_N, STAGES> Tile;                                                    \
    const long long m0 = (long long)blockIdx.x * Tile::BM, n0 = (long long)blockIdx.y * Tile::BN; \
    const DgTensorMap* const a_maps[1] = {&a_map};                                               \
    const DgTensorMap* const b_maps[1][1] = {{&b_map}};                                          \
    const long long seg_k[1] = {K};                                                              \
    dg_wgmma_init_barriers<Tile>();                                                              \
    if (dg_wgmma_is_producer<Tile>()) {                                                          \
      dg_wgmma_mainloop_producer<Tile, 1>(a_maps, b_maps, seg_k, m0, n0);                        \
    } else {                                                                                     \
      float acc[1][Tile::BN / 2];                                                                \
      dg_wgmma_mainloop_consumer<Tile>(acc, dg_wgmma_k_tiles<Tile>(seg_k));                      \
      dg_wgmma_epilogue<Tile>(acc, m0, M, n0, N,                                                 \
                              [&](long long r, long long col, float v) { c[r * N + col] = v; }); \
    }                                                                                            \
  }                                                                                              \
  DG_EMU_ENTRY(NAME)
WGMMA_GEMM_KERNEL(wgmma_gemm_128x64x3, 128, 64, 3)
WGMMA_GEMM_KERNEL(wgmma_gemm_64x128x2, 64, 128, 2)

// C = A B^T + bias[row], bias staged by the producer's stagers beside the main loop (Note [Rank-r
// staging beside the main loop]): Tile::kSmemBytes + 128 floats and a flag of dynamic shared
// memory. Here the stagers start only when the producer's leader is done (after the consumers
// have freed the last stage, so as their main loop ends) and walk kRounds rounds with a
// __syncwarp in each: they are still copying when the consumers' epilogue starts, as a GPU's
// stagers are when their loads miss, and only the `staged` barrier orders its reads after the
// copies.
extern "C" __global__ void __launch_bounds__(384, 1)
    wgmma_gemm_staged_128x64x3(const __grid_constant__ DgTensorMap a_map,
                               const __grid_constant__ DgTensorMap b_map, const float* bias,
                               float* c, long long M, long long N, long long K) {
  typedef DgWgmmaTile<128, 64, 3> Tile;
  constexpr int kRounds = 32;
  const long long m0 = (long long)blockIdx.x * Tile::BM, n0 = (long long)blockIdx.y * Tile::BN;
  float* const staged = reinterpret_cast<float*>(dg_dynamic_smem() + Tile::kSmemBytes);
  volatile int* const leader_done = reinterpret_cast<volatile int*>(staged + Tile::BM);
  if (threadIdx.x == 0) *leader_done = 0;  // published by dg_wgmma_init_barriers' barrier
  const DgTensorMap* const a_maps[1] = {&a_map};
  const DgTensorMap* const b_maps[1][1] = {{&b_map}};
  const long long seg_k[1] = {K};
  dg_wgmma_init_barriers<Tile>();
  if (dg_wgmma_is_producer<Tile>()) {
    dg_wgmma_mainloop_producer<Tile, 1>(a_maps, b_maps, seg_k, m0, n0);
    if (threadIdx.x % 128 == 0) *leader_done = 1;
    if (dg_wgmma_is_stager<Tile>()) {
      while (!__any_sync(0xffffffffu, *leader_done != 0)) {
      }
      for (int i = 0; i < kRounds; ++i) {
        const int r = dg_wgmma_stager_index<Tile>() + i * Tile::kStagingThreads;
        if (r < Tile::BM) staged[r] = m0 + r < M ? bias[m0 + r] : 0.0f;
        __syncwarp();
      }
      dg_wgmma_staged_arrive<Tile>();
    }
  } else {
    float acc[1][Tile::BN / 2];
    dg_wgmma_mainloop_consumer<Tile>(acc, dg_wgmma_k_tiles<Tile>(seg_k));
    dg_wgmma_staged_wait<Tile>();
    dg_wgmma_epilogue<Tile>(acc, m0, M, n0, N, [&](long long r, long long col, float v) {
      c[r * N + col] = v + staged[r - m0];
    });
  }
}
DG_EMU_ENTRY(wgmma_gemm_staged_128x64x3)

// The rank-r epilogue alone (Note [Rank-r products on tensor cores]): two products of rank 24
// (two k16 steps each, j = 24-31 zero), U_q [M][24] and W_q [N][24] in f32, staged as bf16 splits
// by every thread, then the consumers' wgmmas; c[(row N + col) 2 + q] = product q there. One block
// of 384 threads, M <= 128, N <= 64, DgWgmmaRank's offset + bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(384, 1)
    wgmma_rank_products(const float* u0, const float* w0, const float* u1, const float* w1,
                        float* c, long long M, long long N) {
  typedef DgWgmmaTile<128, 64, 2> Tile;
  typedef DgWgmmaRank<Tile, 2, 2> Rank;
  unsigned char* const rank = dg_dynamic_smem() + Rank::kOffset;
  unsigned char* const rank_b = rank + Rank::kKTiles * Tile::BM * 128;
  for (int e = threadIdx.x; e < Tile::BM * 32; e += blockDim.x) {
    const int r = e / 32, j = e % 32;
    const bool in = r < M && j < 24;
    dg_wgmma_rank_split<2>(rank, Tile::BM, r, 0, j, in ? u0[r * 24 + j] : 0.0f);
    dg_wgmma_rank_split<2>(rank, Tile::BM, r, 1, j, in ? u1[r * 24 + j] : 0.0f);
  }
  for (int e = threadIdx.x; e < Tile::BN * 32; e += blockDim.x) {
    const int n = e / 32, j = e % 32;
    const bool in = n < N && j < 24;
    dg_wgmma_rank_split<2>(rank_b, Tile::BN, n, 0, j, in ? w0[n * 24 + j] : 0.0f);
    dg_wgmma_rank_split<2>(rank_b, Tile::BN, n, 1, j, in ? w1[n * 24 + j] : 0.0f);
  }
  dg_fence_proxy_async();
  __syncthreads();
  if (threadIdx.x >= 256) return;
  float acc[1][Tile::BN / 2] = {};
  DgDirectStores direct;
  dg_wgmma_epilogue_rank<Tile, 2, 2>(
      acc, 0, M, 0, N, rank,
      [&](long long r, long long col, float, const float (&p)[2], const DgDirectStores&) {
        c[(r * N + col) * 2] = p[0];
        c[(r * N + col) * 2 + 1] = p[1];
      },
      direct);
}
DG_EMU_ENTRY(wgmma_rank_products)
)cuda";

}  // namespace dg::emu::testing
