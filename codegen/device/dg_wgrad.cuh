// Staging registers of the weight-gradient partials kernel (codegen/emit_wgrad.cc): one thread's
// share of a 16-token stage of an operand, loaded ahead of its use as raw bits.
//
// Note [Weight-gradient staging]
// The partials kernel stages 16 tokens of each operand in shared memory per k step. Written as a
// rolled loop of "load an element, evaluate its prologue, store it", every load's latency was
// waited out before the next load issued: a review of the sm_90a SASS counted 17 global-load
// latencies in series per 16 tokens. Now a thread owns fixed vectors of V neighbouring columns
// (16 bytes of the operand's leaf tensors, V = 4 for f32, 8 for bf16 and f16) and the k loop is
// software-pipelined through registers: the loads of step k0 + 16 are issued right after step
// k0's stores, before its FFMAs, and land in raw bits (one uint4 per vector, untouched until the
// next step's stores decode them and evaluate the prologue). So a stage costs one load latency,
// hidden behind 256 FFMAs per thread, and one LDG.128 per 16 bytes.
// - A leaf read along a token row (address k * W + c, W % V == 0) takes one 16-byte load when its
//   base pointer is 16-byte aligned, which the kernel checks once (block-uniform) and the launch
//   reports (Note [Unaligned operands] in codegen/kernel_plan.h); otherwise, at the operand's
//   edge, or for a leaf read across tokens (address c * W + k), the V elements load one by one
//   into the same registers, all of a stage's loads still issued before the first store.
// - The values are the elements' bits: the products and their order are those of element loads.
#pragma once
#include "dg_ops.cuh"
#include "dg_types.cuh"

#if defined(DG_HAS_DEVICE)

// V lanes of T (f32, bf16 or f16) as raw bits in 16 bytes.
template <class T>
struct DgWgradVector {
  static constexpr int kLanes = 16 / static_cast<int>(sizeof(T));
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16- or 32-bit elements");
  uint4 bits;

  // Lanes [0, n) from p, p + stride, ...; the rest read as zero bits. `vector`: one 16-byte load
  // (the caller proved p 16-byte aligned, stride 1 and n >= kLanes).
  DG_DEVICE void load(const T* p, long long stride, int n, bool vector) {
    if (vector) {
      bits = __ldg(reinterpret_cast<const uint4*>(p));
      return;
    }
    dg_u32 w[4];
    DG_UNROLL
    for (int i = 0; i < 4; ++i) w[i] = 0u;
    DG_UNROLL
    for (int j = 0; j < kLanes; ++j) {
      if (j >= n) continue;
      if constexpr (sizeof(T) == 4) {
        w[j] = dg_float_as_bits(p[j * stride]);
      } else {
        w[j / 2] |= dg_u32{p[j * stride].bits} << (16 * (j % 2));
      }
    }
    bits = make_uint4(w[0], w[1], w[2], w[3]);
  }

  // Lane j as a float (exact: every bf16 and f16 is a float).
  DG_DEVICE float lane(int j) const {
    const dg_u32 w = j / (kLanes / 4) == 0   ? bits.x
                     : j / (kLanes / 4) == 1 ? bits.y
                     : j / (kLanes / 4) == 2 ? bits.z
                                             : bits.w;
    if constexpr (sizeof(T) == 4) {
      return dg_bits_as_float(w);
    } else {
      const dg_u16 h = static_cast<dg_u16>(j % 2 == 0 ? w & 0xffffu : w >> 16);
      return dg_widen(T{h});
    }
  }
};

// V lanes of any other element type, loaded one by one.
template <class T, int V>
struct DgWgradLanes {
  T v[V];

  DG_DEVICE void load(const T* p, long long stride, int n) {
    DG_UNROLL
    for (int j = 0; j < V; ++j) v[j] = j < n ? p[j * stride] : T{};
  }
  DG_DEVICE float lane(int j) const { return dg_convert<float>(v[j]); }
};

DG_DEVICE bool dg_wgrad_aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// Counts the block on its tile's arrival counter, after its partials are stored; true in the
// last of the tile's `blocks` blocks to count, which resets the counter and may then read every
// block's partials (Note [Last block reduces] and Note [Arrival counters] in
// codegen/emit_rank_gemm.cc). `last` is a __shared__ flag.
DG_DEVICE bool dg_wgrad_last_block(unsigned* arrivals, unsigned blocks, bool* last) {
  __threadfence();  // this thread's partials, visible before the block counts
  __syncthreads();
  if (threadIdx.x == 0) {
    *last = atomicAdd(arrivals, 1u) == blocks - 1;
    if (*last) atomicExch(arrivals, 0u);  // every block of the tile has counted
  }
  __syncthreads();
  if (!*last) return false;
  __threadfence();  // the other blocks' partials, read after their counts
  return true;
}

#endif
