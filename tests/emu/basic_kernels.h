// Test kernels written as the code generator writes them: one CUDA translation unit, extern "C"
// __global__ kernels with runtime `long long` extents, a DG_EMU_ENTRY after each. The same text
// is run under host emulation (emu_basic_test.cc) and compiled by NVRTC (nvrtc_device_test.cc).
#pragma once

namespace dg::emu::testing {

inline constexpr const char* kBasicKernels = R"cuda(
#include "dg_device.cuh"

// Elementwise add over a ragged extent: the last block is partly predicated off.
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
DG_EMU_ENTRY(vadd)

// One row per block: a shared-memory tree reduction and dg_block_reduce_sum side by side, and a
// __shared__ tag that no other block may change while this one waits at barriers.
extern "C" __global__ void __launch_bounds__(128) row_sums(const float* __restrict__ x,
                                                           float* __restrict__ out,
                                                           int* __restrict__ clobbered,
                                                           long long cols) {
  __shared__ float partial[128];
  __shared__ unsigned tag;
  const unsigned tid = threadIdx.x;
  if (tid == 0) tag = blockIdx.x;
  const float* row = x + (long long)blockIdx.x * cols;
  float v = 0.0f;
  for (long long j = tid; j < cols; j += blockDim.x) v += row[j];
  partial[tid] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) partial[tid] += partial[tid + s];
    __syncthreads();
  }
  const float tree = partial[0];
  const float helper = dg_block_reduce_sum(v);
  if (tid == 0) {
    out[2 * blockIdx.x] = tree;
    out[2 * blockIdx.x + 1] = helper;
    clobbered[blockIdx.x] = tag != blockIdx.x;
  }
}
DG_EMU_ENTRY(row_sums)

// Warp shuffles and votes; 9 floats per thread and 3 words per warp.
extern "C" __global__ void warp_ops(const float* __restrict__ x, float* __restrict__ out,
                                    unsigned* __restrict__ votes) {
  const unsigned t = threadIdx.x, lane = t & 31u;
  const float v = x[t];
  float* o = out + 9 * t;
  o[0] = dg_warp_reduce_sum(v);
  float down = v;
  for (int s = 16; s > 0; s >>= 1) down += __shfl_down_sync(0xffffffffu, down, s);
  o[1] = down;
  float scan = v;
  for (int s = 1; s < 32; s <<= 1) {
    const float up = __shfl_up_sync(0xffffffffu, scan, s);
    if (lane >= (unsigned)s) scan += up;
  }
  o[2] = scan;
  o[3] = __shfl_sync(0xffffffffu, v, 3);
  o[4] = __shfl_xor_sync(0xffffffffu, v, 1, 8);
  o[5] = __shfl_sync(0xffffffffu, v, 2, 8);
  o[6] = (float)__shfl_down_sync(0xffffffffu, (int)lane * 10, 4, 16);
  o[7] = dg_warp_reduce_max(v);
  const unsigned long long wide = __shfl_xor_sync(0xffffffffu, (unsigned long long)lane << 40, 31);
  o[8] = (float)(wide >> 40);
  const unsigned ballot = __ballot_sync(0xffffffffu, v > 0.0f);
  const int any = __any_sync(0xffffffffu, v > 100.0f);
  const int all = __all_sync(0xffffffffu, v > -100.0f);
  if (lane == 0) {
    votes[3 * (t / 32)] = ballot;
    votes[3 * (t / 32) + 1] = any;
    votes[3 * (t / 32) + 2] = all;
  }
}
DG_EMU_ENTRY(warp_ops)

// Atomics from many blocks, which the emulation runs on several OS threads.
extern "C" __global__ void atomics(float* fsum, int* count, unsigned long long* isum, int* imax,
                                   long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    dg_atomic_add(fsum, 1.0f);
    atomicAdd(count, 1);
    atomicAdd(isum, (unsigned long long)i);
    atomicMax(imax, (int)i);
  }
}
DG_EMU_ENTRY(atomics)

// Reverses each block's slice through dynamic shared memory (blockDim.x floats).
extern "C" __global__ void reverse_blocks(const float* __restrict__ x, float* __restrict__ y,
                                          long long n) {
  float* buf = DG_DYNAMIC_SMEM(float);
  const long long base = (long long)blockIdx.x * blockDim.x;
  const unsigned t = threadIdx.x;
  buf[t] = base + t < n ? x[base + t] : 0.0f;
  __syncthreads();
  if (base + t < n) y[base + t] = buf[blockDim.x - 1 - t];
}
DG_EMU_ENTRY(reverse_blocks)

// Every built-in index of a 3-D launch, packed into one word per thread.
extern "C" __global__ void index3d(unsigned* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  out[block * per_block + dg_thread_linear()] = (blockIdx.z << 24) | (blockIdx.y << 20) |
      (blockIdx.x << 16) | (threadIdx.z << 8) | (threadIdx.y << 4) | threadIdx.x;
}
DG_EMU_ENTRY(index3d)

// Barriers that also reduce a predicate, back to back.
extern "C" __global__ void barrier_votes(int* out) {
  const int c = __syncthreads_count(threadIdx.x % 3 == 0);
  const int a = __syncthreads_and(threadIdx.x < 1000);
  const int o = __syncthreads_or(threadIdx.x == 5);
  const int c2 = __syncthreads_count(threadIdx.x < 10);
  if (c != (int)(blockDim.x + 2) / 3 || c2 != 10) atomicAdd(&out[4], 1);
  if (threadIdx.x == 0) {
    out[0] = c;
    out[1] = a;
    out[2] = o;
    out[3] = c2;
  }
}
DG_EMU_ENTRY(barrier_votes)

// Broken on purpose: half the block returns before a __syncthreads the other half waits at.
extern "C" __global__ void early_exit_barrier(float* out) {
  if (threadIdx.x >= 16) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}
DG_EMU_ENTRY(early_exit_barrier)

// Broken on purpose: a full-warp shuffle after half the warp has returned.
extern "C" __global__ void early_exit_shuffle(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}
DG_EMU_ENTRY(early_exit_shuffle)

// Broken on purpose: the two halves of a warp meet at different collectives.
extern "C" __global__ void divergent_collectives(float* out) {
  if (threadIdx.x < 16) {
    __syncwarp();
  } else {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 2.0f, 0);
  }
}
DG_EMU_ENTRY(divergent_collectives)

extern "C" __global__ void trap_in_block_one(float* out) {
  if (blockIdx.x == 1 && threadIdx.x == 3) __trap();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}
DG_EMU_ENTRY(trap_in_block_one)
)cuda";

}  // namespace dg::emu::testing
