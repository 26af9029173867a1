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
)cuda";

}  // namespace dg::emu::testing
