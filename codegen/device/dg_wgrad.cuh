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
#include "dg_rank_mma.cuh"
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

  // All lanes from p (16-byte aligned, every lane inside the operand) when `inside`, else zero
  // bits: the loop for aligned operands has no element path (Note [Weight-gradient k loop] in
  // codegen/emit_wgrad.cc).
  DG_DEVICE void load_whole(const T* p, bool inside) {
    bits = inside ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0u, 0u, 0u, 0u);
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

// Note [Weight-gradient products on tensor cores]
// A k step of the partials kernel multiplies the stage's 16 tokens of A (TP columns) and B (TQ
// columns), both staged as f32 rows of tokens (As[k][p], Bs[k][q]), into the block's TP x TQ
// tile. On FMA pipes that was 256 FFMA and 32 LDS.128 per thread and step, and the kernel ran at
// its issue rate (`dyngen plan`: 137.6 us of Phi-3.5-MoE's backward at s = 4096, in 6 loops of
// 477 to 495 instructions). Now each of the 8 warps owns four m16n8 tiles (kMT strips of 16 rows
// x kNT tiles of 8 columns: 2 x 2 of 256 x 16, 1 x 4 of 16 x 256 and 64 x 64) and runs mma.sync
// m16n8k16 on bf16 pieces of the staged values, f32 accuracy kept:
// - An f32 value splits into three bf16 pieces, v = p0 + p1 + p2 + r (p0 = bf16(v), p1 =
//   bf16(v - p0), p2 = bf16(v - p0 - p1)), |r| <= 2^-27 |v|; an operand whose values are bf16 (a
//   gradient dy, an activation x, through a widening cast or a scaling by 2^j) is its p0 alone.
// - The products are the pairs of pieces of order at most 2 (p_i q_j, i + j <= 2), largest
//   first: one MMA for two bf16 operands, three for one, six for none. What is left out is below
//   2^-26 of each product, under f32's own rounding: the gradients match an f32 FMA loop's to
//   f32 accuracy (tests/codegen/wgrad_kernel_test.cc holds them to 1e-6 of their scale; the two
//   pieces of the rank-r kernels, Note [Rank-r split-K on tensor cores], missed by 2^-15).
// A fragment's two values lie in neighbouring token rows, so each is a scalar LDS: with the rows
// 260 floats apart, lane (g, t) reads bank 8 t + g, none shared. The accumulators stay f32; a
// tile's products come from the same instructions in the same order on every run, and the chunks
// still sum in chunk order.
template <int TP, int TQ, bool A_EXACT, bool B_EXACT>
struct DgWgradMma {
  static constexpr int kStrips = TP / 16, kTiles = TQ / 8;
  static constexpr int kMT = kStrips >= 8 ? kStrips / 8 : 1, kNT = 4 / kMT;
  static constexpr int kWarpsQ = kTiles / kNT;
  static constexpr int kPiecesA = A_EXACT ? 1 : 3, kPiecesB = B_EXACT ? 1 : 3;
  static_assert(TP % 16 == 0 && TQ % 8 == 0 && kMT * kNT == 4, "four m16n8 tiles a warp");
  static_assert((kStrips / kMT) * kWarpsQ == 8, "8 warps cover the tile");
  int a_off, b_off, p_lane, q_lane;  // this lane's first A and B element; its row and column

  DG_DEVICE explicit DgWgradMma(int ld) {
    const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
    const int g = lane / 4, t = lane % 4;
    const int p_warp = 16 * kMT * (warp / kWarpsQ), q_warp = 8 * kNT * (warp % kWarpsQ);
    a_off = 2 * t * ld + p_warp + g;
    b_off = 2 * t * ld + q_warp + g;
    p_lane = p_warp + g;
    q_lane = q_warp + 2 * t;
  }
  // Accumulator acc[i][2 h + e] of tile i holds row row(i, h), column col(i) + e of the tile.
  DG_DEVICE int row(int i, int h) const { return p_lane + 16 * (i / kNT) + 8 * h; }
  DG_DEVICE int col(int i) const { return q_lane + 8 * (i % kNT); }

  // acc += this stage's A^T B: As[k][p] and Bs[k][q], rows of `ld` floats, k < 16.
  DG_DEVICE void multiply(const float* As, const float* Bs, int ld, float (&acc)[4][4]) const {
    dg_u32 a[kMT][kPiecesA][4];
    DG_UNROLL
    for (int m = 0; m < kMT; ++m) {
      DG_UNROLL
      for (int i = 0; i < 4; ++i) {  // a[i]: row g + 8 (i % 2), k 2t + 8 (i / 2) and + 1
        const float* p = As + a_off + 16 * m + 8 * (i % 2) + 8 * (i / 2) * ld;
        dg_u32 pieces[kPiecesA];
        dg_split_bf16_pair<kPiecesA>(p[0], p[ld], pieces);
        DG_UNROLL
        for (int j = 0; j < kPiecesA; ++j) a[m][j][i] = pieces[j];
      }
    }
    DG_UNROLL
    for (int n = 0; n < kNT; ++n) {
      dg_u32 b[kPiecesB][2];
      DG_UNROLL
      for (int i = 0; i < 2; ++i) {  // b[i]: k 2t + 8 i and + 1, column g
        const float* p = Bs + b_off + 8 * n + 8 * i * ld;
        dg_u32 pieces[kPiecesB];
        dg_split_bf16_pair<kPiecesB>(p[0], p[ld], pieces);
        DG_UNROLL
        for (int j = 0; j < kPiecesB; ++j) b[j][i] = pieces[j];
      }
      DG_UNROLL
      for (int m = 0; m < kMT; ++m) {
        float(&c)[4] = acc[m * kNT + n];
        DG_UNROLL
        for (int order = 0; order <= 2; ++order) {  // p_i q_j with i + j = order
          DG_UNROLL
          for (int i = 0; i < kPiecesA; ++i) {
            const int j = order - i;
            if (j >= 0 && j < kPiecesB) dg_mma_m16n8k16_bf16(c, a[m][i], b[j], c);
          }
        }
      }
    }
  }
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
