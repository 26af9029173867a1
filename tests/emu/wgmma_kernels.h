// wgmma test kernels (codegen/device/dg_wgmma_sm90.cuh): one warpgroup (128 threads) per block;
// each copies a shared-memory image that the test laid out from the PTX ISA's figures into dynamic
// shared memory, runs wgmmas on descriptors the test encoded, and dumps every thread's raw
// accumulator registers: out[T * N / 2 + i] = d[i] of thread T. kWgmmaKernelBody leaves out the
// include of dg_wgmma_sm90.cuh so that the mutation test can put a modified copy in front of it.
#pragma once

namespace dg::emu::testing {

inline constexpr const char* kWgmmaKernelBody = R"cuda(
#include "dg_mbarrier_sm90.cuh"

// Ordinary stores, then the fence that orders them before the async proxy's reads (wgmma). The
// descriptors come relative to dynamic shared memory; this relocates them to its shared-window
// address (0 under emulation, past the reserved and static bytes on a GPU).
__device__ __forceinline__ void load_image(const unsigned char* image, unsigned bytes,
                                           unsigned long long& da, unsigned long long& db) {
  unsigned char* smem = dg_dynamic_smem();
  for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x) smem[i] = image[i];
  const unsigned long long base = dg_smem_address(smem) >> 4;
  da += base;
  db += base;
  dg_fence_proxy_async();
  __syncthreads();
}

template <int N>
__device__ __forceinline__ void dump(float* out, const float (&d)[N / 2]) {
  for (int i = 0; i < N / 2; ++i) out[threadIdx.x * (N / 2) + i] = d[i];
}

// One m64nNk16: d = A B^T, or init + A B^T when `accumulate`.
template <int N>
__device__ __forceinline__ void one_mma(const unsigned char* image, unsigned bytes,
                                        unsigned long long da, unsigned long long db,
                                        const float* init, float* out, int accumulate) {
  load_image(image, bytes, da, db);
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = init[threadIdx.x * (N / 2) + i];
  dg_wgmma_fence();
  dg_wgmma_m64nNk16_bf16<N>(d, da, db, accumulate != 0);
  dg_wgmma_commit();
  dg_wgmma_wait<0>();
  dump<N>(out, d);
}

#define WGMMA_ONE_MMA_KERNEL(N)                                                              \
  extern "C" __global__ void __launch_bounds__(128)                                          \
      wgmma_n##N(const unsigned char* image, unsigned bytes, unsigned long long da,          \
                 unsigned long long db, const float* init, float* out, int accumulate) {     \
    one_mma<N>(image, bytes, da, db, init, out, accumulate);                                 \
  }                                                                                          \
  DG_EMU_ENTRY(wgmma_n##N)
WGMMA_ONE_MMA_KERNEL(16)
WGMMA_ONE_MMA_KERNEL(32)
WGMMA_ONE_MMA_KERNEL(64)
WGMMA_ONE_MMA_KERNEL(128)
WGMMA_ONE_MMA_KERNEL(256)

// K = 16 * steps as k16 steps into the same registers, one group: step kk starts 32 bytes
// further into each row (the descriptors' start address field counts 16 bytes).
extern "C" __global__ void __launch_bounds__(128)
    wgmma_steps_n16(const unsigned char* image, unsigned bytes, unsigned long long da,
                    unsigned long long db, int steps, float* out) {
  load_image(image, bytes, da, db);
  float d[8];
  dg_wgmma_fence();
  for (int kk = 0; kk < steps; ++kk)
    dg_wgmma_m64nNk16_bf16<16>(d, da + 2 * kk, db + 2 * kk, kk > 0);
  dg_wgmma_commit();
  dg_wgmma_wait<0>();
  dump<16>(out, d);
}
DG_EMU_ENTRY(wgmma_steps_n16)

// B MN-major (imm-trans-b = 1): K = 16 * steps as k16 steps, B's start moving b_step bytes a
// step (16 K rows) and A's 32 bytes (K-major).
template <int N>
__device__ __forceinline__ void mn_major_b(const unsigned char* image, unsigned bytes,
                                           unsigned long long da, unsigned long long db,
                                           int steps, unsigned b_step, float* out) {
  load_image(image, bytes, da, db);
  float d[N / 2];
  dg_wgmma_fence();
  for (int kk = 0; kk < steps; ++kk)
    dg_wgmma_m64nNk16_bf16<N, false, true>(d, da + 2 * kk, db + (b_step >> 4) * kk, kk > 0);
  dg_wgmma_commit();
  dg_wgmma_wait<0>();
  dump<N>(out, d);
}

#define WGMMA_MN_MAJOR_B_KERNEL(N)                                                           \
  extern "C" __global__ void __launch_bounds__(128)                                          \
      wgmma_tb_n##N(const unsigned char* image, unsigned bytes, unsigned long long da,       \
                    unsigned long long db, int steps, unsigned b_step, float* out) {         \
    mn_major_b<N>(image, bytes, da, db, steps, b_step, out);                                 \
  }                                                                                          \
  DG_EMU_ENTRY(wgmma_tb_n##N)
WGMMA_MN_MAJOR_B_KERNEL(16)
WGMMA_MN_MAJOR_B_KERNEL(64)
WGMMA_MN_MAJOR_B_KERNEL(128)

// Reads the registers before the wait: undefined on a GPU, NaN under emulation.
extern "C" __global__ void __launch_bounds__(128)
    wgmma_read_early(const unsigned char* image, unsigned bytes, unsigned long long da,
                     unsigned long long db, float* out) {
  load_image(image, bytes, da, db);
  float d[8];
  for (int i = 0; i < 8; ++i) d[i] = 0.0f;
  dg_wgmma_fence();
  dg_wgmma_m64nNk16_bf16<16>(d, da, db, true);
  dg_wgmma_commit();
  dump<16>(out, d);
  dg_wgmma_wait<0>();
}
DG_EMU_ENTRY(wgmma_read_early)

// Two groups; wait_group 1 retires the first only. out: d1 after wait<1>, d2 after wait<1>, d2
// after wait<0>, 128 x 8 floats each.
extern "C" __global__ void __launch_bounds__(128)
    wgmma_two_groups(const unsigned char* image, unsigned bytes, unsigned long long da,
                     unsigned long long db, float* out) {
  load_image(image, bytes, da, db);
  float d1[8], d2[8];
  dg_wgmma_fence();
  dg_wgmma_m64nNk16_bf16<16>(d1, da, db, false);
  dg_wgmma_commit();
  dg_wgmma_m64nNk16_bf16<16>(d2, da, db, false);
  dg_wgmma_commit();
  dg_wgmma_wait<1>();
  dump<16>(out, d1);
  dump<16>(out + 128 * 8, d2);
  dg_wgmma_wait<0>();
  dump<16>(out + 2 * 128 * 8, d2);
}
DG_EMU_ENTRY(wgmma_two_groups)

// Zeroes the operands after the issue, before the wait: the result depends on when the
// operands are read (DYNGEN_EMU_ASYNC).
extern "C" __global__ void __launch_bounds__(128)
    wgmma_overwrite_before_wait(const unsigned char* image, unsigned bytes, unsigned long long da,
                                unsigned long long db, float* out) {
  load_image(image, bytes, da, db);
  float d[8];
  dg_wgmma_fence();
  dg_wgmma_m64nNk16_bf16<16>(d, da, db, false);
  dg_wgmma_commit();
  __syncthreads();
  for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x) dg_dynamic_smem()[i] = 0;
  dg_fence_proxy_async();
  __syncthreads();
  dg_wgmma_wait<0>();
  dump<16>(out, d);
}
DG_EMU_ENTRY(wgmma_overwrite_before_wait)

extern "C" __global__ void __launch_bounds__(128)
    wgmma_without_fence(const unsigned char* image, unsigned bytes, unsigned long long da,
                        unsigned long long db, float* out) {
  load_image(image, bytes, da, db);
  float d[8];
  dg_wgmma_m64nNk16_bf16<16>(d, da, db, false);
  dg_wgmma_commit();
  dg_wgmma_wait<0>();
  dump<16>(out, d);
}
DG_EMU_ENTRY(wgmma_without_fence)

extern "C" __global__ void __launch_bounds__(128)
    wgmma_exit_in_flight(const unsigned char* image, unsigned bytes, unsigned long long da,
                         unsigned long long db, float* out) {
  load_image(image, bytes, da, db);
  float d[8];
  dg_wgmma_fence();
  dg_wgmma_m64nNk16_bf16<16>(d, da, db, false);
  dg_wgmma_commit();
  out[threadIdx.x] = 1.0f;
}
DG_EMU_ENTRY(wgmma_exit_in_flight)
)cuda";

inline std::string wgmma_kernels() {
  return std::string("#include \"dg_device.cuh\"\n#include \"dg_wgmma_sm90.cuh\"\n") +
         kWgmmaKernelBody;
}

}  // namespace dg::emu::testing
