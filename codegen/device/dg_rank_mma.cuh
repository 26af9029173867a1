// The rank-r split-K kernel's products on tensor cores (codegen/emit_rank_gemm.cc).
//
// Note [Rank-r split-K on tensor cores]
// The split-K kernel stages each k tile of A (BM x 32) and B (32 x NCP) in shared memory as f32
// (Note [Rank-r products]). Its 256 threads used to multiply them with FFMAs, one row x 4
// columns a thread: 249 instructions per warp and k tile of which 128 FFMA, so `dyngen plan` put
// the kernels at their issue rate (Phi-3.5-MoE at s = 4096: 36.6 of the forward gate/up
// product's 39.6 us). Now each of the 8 warps owns one m16n8 tile of the block's BM x NCP (BM x
// NCP is 1024 for every NCP) and runs mma.sync m16n8k16 on bf16 splits of the f32 values, as the
// wgmma epilogue does (Note [Rank-r products on tensor cores] in dg_gemm_sm90.cuh): v = hi + lo,
// and A B ~ A_hi B_hi + A_lo B_hi + A_hi B_lo, about 2^-15 relative to each product. An operand
// loaded from bf16 (x, or dy, widened by a fused cast) is exact in hi, so its lo term is left out
// (A_EXACT, B_EXACT): the forward's x @ A^T takes two MMAs per k16 step. The fragments come from
// the f32 tiles with 8-byte loads (Note [mma fragment layouts] in dg_mma_sm80.cuh) and are split
// in registers; the accumulators stay f32, and each warp's partial tile is the same for a given
// M on every run.
#pragma once
#include "dg_config.cuh"
#include "dg_mma_sm80.cuh"
#include "dg_types.cuh"

#if defined(DG_HAS_DEVICE)

// (x0, x1) as PIECES bf16 pieces, each packed as an mma register (x0 in the low half): piece i
// is bf16 of what the pieces before it leave, so x = p0 + p1 + ... to 2^-9 of the last piece.
// The rank-r kernels take two (hi, lo), the weight gradients three (Note [Weight-gradient products
// on tensor cores] in dg_wgrad.cuh).
template <int PIECES>
DG_DEVICE void dg_split_bf16_pair(float x0, float x1, dg_u32 (&piece)[PIECES]) {
  DG_UNROLL
  for (int i = 0; i < PIECES; ++i) {
    piece[i] = dg_float2_to_bf16x2(x0, x1);
    x0 -= dg_bf16x2_lo(piece[i]);  // exact: what is left has fewer bits than x
    x1 -= dg_bf16x2_hi(piece[i]);
  }
}

// A warp's m16n8 tile of the block's BM x NCP partial product over staged k tiles of KT: rows
// 16 (w / (NCP / 8)) + [0, 16) and columns 8 (w % (NCP / 8)) + [0, 8) for warp w, c in the mma
// layout (c[2 h + e] at row() + 8 h, col() + e). The fragments' offsets are fixed per thread, so
// they are computed once, outside the k loop.
template <int KT, int NCP, bool A_EXACT, bool B_EXACT, bool B_K_CONTIGUOUS>
struct DgRankMma {
  static_assert(KT % 16 == 0 && NCP % 8 == 0, "whole k16 steps and n8 tiles");
  int a_off, b_off, a_ld, b_ld;  // this lane's first A and B element, the leading dimensions

  // A at a[row * a_ld + k]; B at b[n * b_ld + k] (B_K_CONTIGUOUS) or b[k * b_ld + n].
  DG_DEVICE DgRankMma(int a_ld_, int b_ld_) : a_ld(a_ld_), b_ld(b_ld_) {
    const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
    const int g = lane / 4, t = lane % 4;
    const int row = 16 * (warp / (NCP / 8)) + g, col = 8 * (warp % (NCP / 8)) + g;
    a_off = row * a_ld + 2 * t;
    b_off = B_K_CONTIGUOUS ? col * b_ld + 2 * t : 2 * t * b_ld + col;
  }
  DG_DEVICE int row() const {
    return 16 * static_cast<int>(threadIdx.x / 32 / (NCP / 8)) +
           static_cast<int>(threadIdx.x % 32) / 4;
  }
  DG_DEVICE int col() const {
    return 8 * static_cast<int>(threadIdx.x / 32 % (NCP / 8)) +
           2 * static_cast<int>(threadIdx.x % 4);
  }

  // c += this k tile's A B.
  DG_DEVICE void multiply(const float* a, const float* b, float (&c)[4]) const {
    a += a_off;
    b += b_off;
    constexpr int kPiecesA = A_EXACT ? 1 : 2, kPiecesB = B_EXACT ? 1 : 2;
    DG_UNROLL
    for (int k = 0; k < KT; k += 16) {
      dg_u32 ah[4], al[4], bh[2], bl[2];
      DG_UNROLL
      for (int i = 0; i < 4; ++i) {  // a[i]: row g + 8 (i % 2), k 2t + 8 (i / 2)
        const float2 v = *reinterpret_cast<const float2*>(a + 8 * (i % 2) * a_ld + k + 8 * (i / 2));
        dg_u32 p[kPiecesA];
        dg_split_bf16_pair<kPiecesA>(v.x, v.y, p);
        ah[i] = p[0];
        al[i] = p[kPiecesA - 1];  // read only when A needs its lo part
      }
      DG_UNROLL
      for (int i = 0; i < 2; ++i) {  // b[i]: k 2t + 8 i and + 1, column g
        float2 v;
        if constexpr (B_K_CONTIGUOUS) {
          v = *reinterpret_cast<const float2*>(b + k + 8 * i);
        } else {
          v.x = b[(k + 8 * i) * b_ld];
          v.y = b[(k + 8 * i + 1) * b_ld];
        }
        dg_u32 p[kPiecesB];
        dg_split_bf16_pair<kPiecesB>(v.x, v.y, p);
        bh[i] = p[0];
        bl[i] = p[kPiecesB - 1];  // read only when B needs its lo part
      }
      dg_mma_m16n8k16_bf16(c, ah, bh, c);
      if constexpr (!A_EXACT) dg_mma_m16n8k16_bf16(c, al, bh, c);
      if constexpr (!B_EXACT) dg_mma_m16n8k16_bf16(c, ah, bl, c);
    }
  }
};

#endif  // DG_HAS_DEVICE
