// The sm_80 tensor-core GEMM's copies (Note [Lean main loop] in dg_gemm_sm80.cuh): each thread's
// share of a stage's operand tiles, planned once per launch and issued with cp.async, or with
// element loads for operands that are not 16-byte aligned.
#pragma once
#include "dg_config.cuh"
#include "dg_cp_async_sm80.cuh"
#include "dg_gemm_tile_sm80.cuh"
#include "dg_types.cuh"

// One thread's share of the copies of a ROWS x COLS operand tile (COLS contiguous in global
// memory) for a block of THREADS threads. K runs along the tile's rows (K_IN_ROWS: an AT A or a
// BKN B) or along its columns.
//
// Each copy instruction of a warp reads whole 32-byte sectors: kThreadsPerRow (at least 2)
// threads share a row and take consecutive 16-byte chunks of it, and a thread's next chunk in the
// row lies 16 * kThreadsPerRow bytes on, an immediate offset of one pointer. A pass covers
// kRowsPerPass rows; each pass has its own pointer (rows are far apart in memory).
template <int ROWS, int COLS, int THREADS, bool K_IN_ROWS>
struct DgGemmTileCopy {
  static constexpr int kChunksPerRow = COLS / 8;
  static constexpr int kThreadsPerRow = THREADS / ROWS > 2
                                            ? (THREADS / ROWS < kChunksPerRow ? THREADS / ROWS
                                                                              : kChunksPerRow)
                                            : (kChunksPerRow < 2 ? kChunksPerRow : 2);
  static constexpr int kChunksPerThread = kChunksPerRow / kThreadsPerRow;  // in one row
  static constexpr int kRowsPerPass = THREADS / kThreadsPerRow;
  static constexpr int kPasses = ROWS / kRowsPerPass;
  static constexpr int kLd = DgSmemTile<ROWS, COLS>::kLd;
  static_assert(COLS % 8 == 0 && kChunksPerRow % kThreadsPerRow == 0, "whole chunks per thread");
  static_assert(THREADS % kThreadsPerRow == 0 && kPasses >= 1 && ROWS % kRowsPerPass == 0,
                "every thread copies the same chunks of every pass");
  static_assert(kChunksPerThread <= 32, "one mask bit per chunk");

  // The pass's first chunk: in the next k-tile to load (K_IN_ROWS), or at the K range's start
  // (the caller passes the K offset, one int for all such copies: advancing a pointer per pass,
  // the compiler also copies it to keep the old value for the copy in flight).
  const dg_bf16* src[kPasses];
  long long k_unit;  // elements from one K index to the next (ld or 1)
  int smem;          // the first chunk's place in the tile, in elements
  int k_pos;         // its K index relative to the tile's first
  unsigned outer;    // K_IN_ROWS: bit c, chunk c lies inside the other extent

  // Element (r, c) of the operand is at base[r * ld + c] (c contiguous); the tile's element
  // (0, 0) is (r0, c0); rows >= row_end and columns >= col_end are outside the operand. K is r
  // when K_IN_ROWS, else c; the K extent is checked by copy(). Rows past the other extent (past M
  // or N, when K runs along the columns) read the last row inside it instead: they only feed
  // accumulators of rows or columns the epilogue never stores, and reading in bounds needs no
  // predicate in the loop (the block's tile starts inside, r0 < row_end). Columns past it (K
  // along the rows) are zero-filled by a per-chunk predicate.
  DG_DEVICE void init(const dg_bf16* base, long long ld, long long r0, long long row_end,
                      long long c0, long long col_end) {
    const int tid = static_cast<int>(threadIdx.x);
    const int row = tid / kThreadsPerRow, col = (tid % kThreadsPerRow) * 8;
    k_unit = K_IN_ROWS ? ld : 1;
    smem = row * kLd + col;
    k_pos = K_IN_ROWS ? row : col;
    DG_UNROLL
    for (int p = 0; p < kPasses; ++p) {
      long long r = r0 + row + p * kRowsPerPass;
      if (!K_IN_ROWS && r >= row_end) r = row_end - 1;
      src[p] = base + r * ld + c0 + col;
    }
    outer = 0;
    DG_UNROLL
    for (int c = 0; c < kChunksPerThread; ++c)
      if (!K_IN_ROWS || c0 + col + c * 8 * kThreadsPerRow < col_end) outer |= 1u << c;
  }

  // Copies the tile whose first K index is k0 into `tile` (its place in a stage) with cp.async,
  // for 16-byte aligned chunks (copy_unaligned otherwise). WHOLE: the tile lies inside K;
  // otherwise K indices >= k_end are zero-filled. EDGE: the block's tile may overhang the other
  // extent (only a K_IN_ROWS copy checks it, per chunk).
  // k_cols: the tile's K offset from the range's start, for a copy with K along the columns.
  template <bool WHOLE, bool EDGE>
  DG_DEVICE void copy(dg_bf16* tile, long long k0, long long k_end, int k_cols) const {
    DG_UNROLL
    for (int p = 0; p < kPasses; ++p) {
      DG_UNROLL
      for (int c = 0; c < kChunksPerThread; ++c) {
        const int step = c * 8 * kThreadsPerRow;  // elements along the row
        const long long k = k0 + k_pos + (K_IN_ROWS ? p * kRowsPerPass : step);
        constexpr bool kAlwaysInside = WHOLE && !(K_IN_ROWS && EDGE);
        const bool inside =
            kAlwaysInside || ((!K_IN_ROWS || !EDGE || ((outer >> c) & 1u)) && (WHOLE || k < k_end));
        dg_bf16* dst = tile + smem + p * kRowsPerPass * kLd + step;
        const dg_bf16* g = src[p] + (K_IN_ROWS ? 0 : k_cols) + step;  // not read when outside
        if (kAlwaysInside)
          dg_cp_async_16(dst, g);
        else
          dg_cp_async_16_zfill(dst, g, inside);
      }
    }
  }

  DG_DEVICE void advance(long long k) {
    DG_UNROLL
    for (int p = 0; p < kPasses; ++p)
      if (K_IN_ROWS) src[p] += k * k_unit;
  }

  // The same chunks as copy with element loads, for operands that are not 16-byte aligned, K
  // indices >= k_end zero-filled: a rolled loop (Note [Lean main loop]: the unaligned loop is kept
  // small).
  template <bool EDGE>
  DG_DEVICE void copy_unaligned(dg_bf16* tile, long long k0, long long k_end, int k_cols) const {
    DG_UNROLL
    for (int p = 0; p < kPasses; ++p) {  // src[] is indexed at compile time only (registers)
      DG_NO_UNROLL
      for (int x = 0; x < kChunksPerThread * 8; ++x) {
        const int c = x / 8, e = x % 8, step = c * 8 * kThreadsPerRow;
        const long long k = k0 + k_pos + (K_IN_ROWS ? p * kRowsPerPass : step);
        const bool inside = (!K_IN_ROWS || !EDGE || ((outer >> c) & 1u)) && k < k_end;
        const dg_bf16* g = src[p] + (K_IN_ROWS ? 0 : k_cols) + step;
        dg_store_shared(tile + smem + p * kRowsPerPass * kLd + step + e,
                        inside ? g[e] : dg_bf16_from_bits(0));
      }
    }
  }
};

// The copies of one stage: A's tile, then each B's, in one buffer.
template <class Tile, bool AT, bool BKN, int NB>
struct DgGemmStageCopies {
  typedef DgGemmTileCopy<AT ? Tile::BK : Tile::BM, AT ? Tile::BM : Tile::BK, Tile::kThreads, AT> A;
  typedef DgGemmTileCopy<BKN ? Tile::BK : Tile::BN, BKN ? Tile::BN : Tile::BK, Tile::kThreads, BKN>
      B;
  static constexpr int kA = DgSmemTile < AT ? Tile::BK : Tile::BM,
                       AT ? Tile::BM : Tile::BK > ::kElems;
  static constexpr int kB = DgSmemTile < BKN ? Tile::BK : Tile::BN,
                       BKN ? Tile::BN : Tile::BK > ::kElems;
  static constexpr int kStage = kA + NB * kB;  // elements of one stage
  A a;
  B b[NB];
  int k_cols = 0;  // the next tile's K offset from the range's start (K_IN_ROWS copies: unused)

  template <bool WHOLE, bool EDGE>
  DG_DEVICE void copy(dg_bf16* stage, long long k0, long long k_end) const {
    a.template copy<WHOLE, EDGE>(stage, k0, k_end, k_cols);
    DG_UNROLL
    for (int j = 0; j < NB; ++j)
      b[j].template copy<WHOLE, EDGE>(stage + kA + j * kB, k0, k_end, k_cols);
  }
  template <bool EDGE>
  DG_DEVICE void copy_unaligned(dg_bf16* stage, long long k0, long long k_end) const {
    a.template copy_unaligned<EDGE>(stage, k0, k_end, k_cols);
    DG_UNROLL
    for (int j = 0; j < NB; ++j)
      b[j].template copy_unaligned<EDGE>(stage + kA + j * kB, k0, k_end, k_cols);
  }
  DG_DEVICE void advance(long long k) {
    k_cols += static_cast<int>(k);
    a.advance(k);
    DG_UNROLL
    for (int j = 0; j < NB; ++j) b[j].advance(k);
  }
};
