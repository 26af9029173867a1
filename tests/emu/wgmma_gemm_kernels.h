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
)cuda";

}  // namespace dg::emu::testing
