// Thread indexing, warp and block reductions, atomics and dynamic shared memory.
#pragma once
#include "dg_config.cuh"
#include "dg_debug.cuh"

// Linear thread index within the block (x fastest), its lane and its warp.
DG_DEVICE unsigned dg_thread_linear() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
DG_DEVICE unsigned dg_lane_id() { return dg_thread_linear() & 31u; }
DG_DEVICE unsigned dg_warp_id() { return dg_thread_linear() >> 5; }

// Sum over the 32 lanes of the warp; every lane gets the result. All 32 lanes must call it.
DG_DEVICE float dg_warp_reduce_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

DG_DEVICE float dg_warp_reduce_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Note [Block reduction]
// Sum over every thread of the block; every thread gets the result. The
// block must be whole warps (at most 32) and every thread must call it, since it contains
// barriers. Three barriers: partials written / total written / total read, the last so that a
// following call may reuse the 32-float scratch.
// The rules for callers: Note [Block reduction].
DG_DEVICE float dg_block_reduce_sum(float v) {
  __shared__ float dg_partials[32];
  const unsigned lane = dg_lane_id(), warp = dg_warp_id();
  const unsigned n_warps = (blockDim.x * blockDim.y * blockDim.z + 31u) >> 5;
  v = dg_warp_reduce_sum(v);
  if (lane == 0) dg_partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < n_warps ? dg_partials[lane] : 0.0f;
    t = dg_warp_reduce_sum(t);  // every lane has read its partial before lane 0 writes below
    if (lane == 0) dg_partials[0] = t;
  }
  __syncthreads();
  const float total = dg_partials[0];
  __syncthreads();
  return total;
}

DG_DEVICE float dg_atomic_add(float* address, float value) { return atomicAdd(address, value); }

// Dynamic shared memory (the launch's dynamic_smem_bytes), 1024-byte aligned in the shared
// window: the 128-byte swizzle of TMA and wgmma works on address bits 4-9, so their tiles start
// on 1024-byte boundaries (Note [wgmma layouts] in dg_wgmma_sm90.cuh); under emulation the window
// starts at dynamic shared memory (Note [Emulated shared window] in dg_emu_smem.h). With
// DG_DEVICE_DEBUG every call checks that alignment and traps without it (Note [Device debug
// mode]). Use DG_DYNAMIC_SMEM(T) instead of `extern __shared__ T x[];`, which the emulation
// cannot express (Note [Shared memory as thread_local] in dg_emu.h).
DG_DEVICE unsigned char* dg_dynamic_smem() {
#if defined(DG_ON_GPU)
  extern __shared__ __align__(1024) unsigned char dg_dynamic_smem_base[];
  unsigned char* const base = dg_dynamic_smem_base;
#else
  unsigned char* const base = ::dg::emu::dynamic_smem();
#endif
#if defined(DG_DEVICE_DEBUG)
  dg_debug_check_dynamic_smem(base);
#endif
  return base;
}
#define DG_DYNAMIC_SMEM(T) (reinterpret_cast<T*>(dg_dynamic_smem()))
