// TMA test kernels (codegen/device/dg_tma_sm90.cuh); see basic_kernels.h for the conventions. The
// tensor map is a __grid_constant__ parameter, as on a GPU.
#pragma once

namespace dg::emu::testing {

inline constexpr const char* kTmaKernels = R"cuda(
#include "dg_device.cuh"
#include "dg_tma_sm90.cuh"

// One box at (x, y) into dynamic shared memory at `offset`: thread 0 expects its bytes and issues
// the copy; early: what thread 0 reads there before waiting; out: the box after the wait.
extern "C" __global__ void tma_box(const __grid_constant__ DgTensorMap map, int x, int y,
                                   unsigned offset, unsigned box_bytes, unsigned char* early,
                                   unsigned char* out) {
  __shared__ __align__(8) dg_u64 bar;
  unsigned char* box = dg_dynamic_smem() + offset;
  if (threadIdx.x == 0) {
    dg_mbarrier_init(&bar, 1);
    dg_fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    dg_mbarrier_arrive_expect_tx(&bar, box_bytes);
    dg_tma_load_2d(box, &map, x, y, &bar);
    for (unsigned i = 0; i < box_bytes; ++i) early[i] = box[i];
  }
  dg_mbarrier_wait_parity(&bar, 0);
  for (unsigned i = threadIdx.x; i < box_bytes; i += blockDim.x) out[i] = box[i];
}
DG_EMU_ENTRY(tma_box)

// A (64 x 64) and B (16 x 64) bf16, K-major, through 128-byte-swizzled boxes at 0 and 8192, one
// barrier for both, then four k16 wgmmas (Note [TMA box copies]: the boxes are 128-byte swizzle
// atoms, SBO 1024). out: every thread's 8 accumulators.
extern "C" __global__ void __launch_bounds__(128)
    tma_then_wgmma(const __grid_constant__ DgTensorMap a_map,
                   const __grid_constant__ DgTensorMap b_map, float* out) {
  __shared__ __align__(8) dg_u64 bar;
  unsigned char* smem = dg_dynamic_smem();
  if (threadIdx.x == 0) {
    dg_mbarrier_init(&bar, 1);
    dg_fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    dg_mbarrier_arrive_expect_tx(&bar, (64 + 16) * 64 * 2);
    dg_tma_load_2d(smem, &a_map, 0, 0, &bar);
    dg_tma_load_2d(smem + 8192, &b_map, 0, 0, &bar);
  }
  dg_mbarrier_wait_parity(&bar, 0);
  const dg_u64 da = dg_wgmma_desc(dg_smem_address(smem), 16, 1024, kDgSwizzle128B);
  const dg_u64 db = dg_wgmma_desc(dg_smem_address(smem + 8192), 16, 1024, kDgSwizzle128B);
  float d[8];
  dg_wgmma_fence();
  for (int kk = 0; kk < 4; ++kk) dg_wgmma_m64nNk16_bf16<16>(d, da + 2 * kk, db + 2 * kk, kk > 0);
  dg_wgmma_commit();
  dg_wgmma_wait<0>();
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = d[i];
}
DG_EMU_ENTRY(tma_then_wgmma)

extern "C" __global__ void tma_never_waited(const __grid_constant__ DgTensorMap map) {
  __shared__ __align__(8) dg_u64 bar;
  dg_mbarrier_init(&bar, 1);
  dg_mbarrier_arrive_expect_tx(&bar, 16);
  dg_tma_load_2d(dg_dynamic_smem(), &map, 0, 0, &bar);
}
DG_EMU_ENTRY(tma_never_waited)
)cuda";

}  // namespace dg::emu::testing
