// The sm_80 tensor-core GEMM's tiles (Note [Tensor-core GEMM] in dg_gemm_sm80.cuh): the block
// tile's shape and warps, a stage's shared-memory operand tiles, and where a thread's ldmatrix
// fragments lie in them.
#pragma once
#include "dg_config.cuh"
#include "dg_mma_sm80.cuh"
#include "dg_types.cuh"

// Note [Sliced K]
// A small-M tile (32 x 64, Note [Tile choice] in codegen/tile_choice.cc) has one or two warps'
// tiles; with one block of it on an SM, its warps used one or two of the SM's four schedulers and
// tensor units (the seed backward's 256 one-warp blocks at s = 512: half of each SM's units at
// most). SLICES_K puts that many warps on each warp tile, each multiplying every SLICES_K-th k16
// step of each stage (warp w is slice w / (WARPS_M WARPS_N)); the block's threads share the
// copies. After the main loop dg_gemm_sum_slices adds the slices' accumulators in slice order
// through shared memory and hands every warp its part of the sum in the layout of
// Tile::Epilogue, the same tile split over SLICES_K times the warps (rows first), so the
// epilogue runs on all of them. The sum's order is fixed: the bits do not depend on the launch.
// They are not an unsliced tile's bits (the GEMM's fallback, a larger variant), which sums K in
// order: the results agree to f32 rounding, a bf16 output to its last bit.
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int SLICES_K_ = 1>
struct DgGemmTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, kWarpsM = WARPS_M_, kWarpsN = WARPS_N_;
  static constexpr int kStages = STAGES_, kSlicesK = SLICES_K_;
  static constexpr int kWarpTiles = kWarpsM * kWarpsN;
  static constexpr int kThreads = 32 * kWarpTiles * kSlicesK;
  static constexpr int WM = BM / kWarpsM, WN = BN / kWarpsN;  // one warp's tile
  static constexpr int MT = WM / 16, NT = WN / 8;             // mma tiles per warp
  static constexpr int kPad = 8;  // 16 bytes per smem row: ldmatrix rows fall in distinct banks
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "warp tile: 16-multiples");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(BK % (16 * kSlicesK) == 0, "whole k16 steps per slice");
  // The epilogue's warps: each slice takes a part of every warp tile, rows first.
  static constexpr int kSplitM = kSlicesK < MT ? kSlicesK : MT, kSplitN = kSlicesK / kSplitM;
  typedef DgGemmTile<BM, BN, BK, kWarpsM * kSplitM, kWarpsN * kSplitN, kStages> Epilogue;
};

// Shared memory of one operand tile per stage: `rows` x `cols` bf16 plus padding.
template <int ROWS, int COLS>
struct DgSmemTile {
  static constexpr int kLd = COLS + 8;
  static constexpr int kElems = ROWS * kLd;
};

// Fragment addresses (Note [mma fragment layouts] in dg_mma_sm80.cuh). A thread's ldmatrix row
// address is its offset into the stage's tile, fixed for the launch, plus a compile-time step per
// 16-row (A) or 16-column (B) tile and 16-wide k slice.
//
// ldmatrix .x4 of the fragment at p, transposed (.trans) when TRANS.
template <bool TRANS>
DG_DEVICE void dg_gemm_ldmatrix(dg_u32 (&r)[4], const dg_bf16* p) {
  if (TRANS)
    dg_ldmatrix_x4_trans(r, p);
  else
    dg_ldmatrix_x4(r, p);
}

// A: rows [wm + 16 mt, +16) and k [kk, kk + 16) of a tile stored [m][k], or [k][m] (AT:
// matrix j = lane / 8 covers m + (j % 2) * 8, k + (j / 2) * 8, loaded with .trans).
template <class Tile, bool AT>
struct DgGemmFragA {
  static constexpr int kLd =
      AT ? DgSmemTile<Tile::BK, Tile::BM>::kLd : DgSmemTile<Tile::BM, Tile::BK>::kLd;
  static DG_DEVICE int offset(int wm, unsigned lane) {
    const int l = static_cast<int>(lane);
    return AT ? ((l / 16) * 8 + l % 8) * kLd + wm + ((l / 8) % 2) * 8
              : (wm + l % 16) * kLd + (l / 16) * 8;
  }
  static DG_DEVICE constexpr int step(int mt, int kk) {
    return AT ? kk * kLd + 16 * mt : 16 * mt * kLd + kk;
  }
};

// B: two n8 tiles, columns [wn + 8 nt, +16), of a tile stored [n][k], or [k][n] (BKN, .trans);
// r[0..1] hold the first n8 tile, r[2..3] the second.
template <class Tile, bool BKN>
struct DgGemmFragB {
  static constexpr int kLd =
      BKN ? DgSmemTile<Tile::BK, Tile::BN>::kLd : DgSmemTile<Tile::BN, Tile::BK>::kLd;
  static DG_DEVICE int offset(int wn, unsigned lane) {
    const int l = static_cast<int>(lane);
    return BKN ? (((l / 8) % 2) * 8 + l % 8) * kLd + wn + (l / 16) * 8
               : (wn + (l / 16) * 8 + l % 8) * kLd + ((l / 8) % 2) * 8;
  }
  static DG_DEVICE constexpr int step(int nt, int kk) {
    return BKN ? kk * kLd + 8 * nt : 8 * nt * kLd + kk;
  }
};
