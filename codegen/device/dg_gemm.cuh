// Tensor-core GEMM mainloop: C[m][n] = sum_k A[m][k] * B[k][n], bf16 operands, fp32 accumulation,
// mma.sync.m16n8k16 fed by ldmatrix from shared memory that a multi-stage cp.async pipeline fills.
//
// Note [Tensor-core GEMM]
// Usage (what generated kernels do; backward kernels use the same pieces):
//   typedef DgGemmTile<64, 128, 32, 2, 2, 3> Tile;             // BM, BN, BK, warps m x n, stages
//   struct Epi { DG_DEVICE void operator()(long long row, int col, float acc) const; };
//   extern "C" __global__ void __launch_bounds__(Tile::kThreads) k(..., long long M) {
//     dg_gemm_tc<Tile, N, K, false, false, 1>(a, lda, b, b, ldb, M, Epi{...});
//   }
//   launched with grid (ceil(M / BM), ceil(N / BN)), block (Tile::kThreads): M tiles on gridDim.x
//   (2^31 - 1 blocks), N tiles on gridDim.y.
// - Layouts. A is [M][K] with A[m][k] at a[m * lda + k] (AT = false) or stored [K][M] with A[m][k]
//   at a[k * lda + m] (AT = true). B is [N][K] like a linear layer's weight, B[k][n] at
//   b[n * ldb + k] (BKN = false), or [K][N], b[k * ldb + n] (BKN = true; ldmatrix.trans).
// - Preconditions (the code generator checks them statically): lda and ldb are multiples of 8
//   elements; the contiguous extent of each operand (K for A and for B when !BKN; M for an AT A;
//   N for a BKN B) is a multiple of 8. Pointers are checked at run time: when one is not 16-byte
//   aligned the tiles are filled with plain loads instead of cp.async (same results, slower).
// - Bounds. k >= K is zero-filled in shared memory (cp.async src-size 0); rows m >= M and n >= N
//   are zero-filled or read a row inside instead (Note [Lean main loop]), values that reach only
//   accumulators the epilogue never sees: it is called only for m < M, n < N. So M = 0, 1, ragged
//   and huge are all correct.
// - The main loop is settled per thread before it starts (Note [Lean main loop]); the epilogue
//   may get rank-r products staged in shared memory (dg_gemm_epilogue_rank, Note [Staged rank-r
//   epilogue] in dg_epilogue.cuh).
// - Two B operands (NB = 2) share the A tile: the horizontal gate/up fusion. The epilogue then
//   gets acc for B0 and acc for B1 of the same (row, col).
// - dg_gemm_mainloop takes the K range at run time ([k_begin, k_end)), for GEMMs whose reduction
//   runs over the token count and for split-K; dg_gemm_tc fixes N and K at compile time.
#pragma once
#include "dg_async.cuh"
#include "dg_config.cuh"
#include "dg_mma.cuh"
#include "dg_store.cuh"
#include "dg_sync.cuh"
#include "dg_types.cuh"

template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct DgGemmTile {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, kWarpsM = WARPS_M_, kWarpsN = WARPS_N_;
  static constexpr int kStages = STAGES_;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int WM = BM / kWarpsM, WN = BN / kWarpsN;  // one warp's tile
  static constexpr int MT = WM / 16, NT = WN / 8;             // mma tiles per warp
  static constexpr int kPad = 8;  // 16 bytes per smem row: ldmatrix rows fall in distinct banks
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "warp tile: 16-multiples");
  static_assert(kStages >= 2, "at least double buffering");
};

// Shared memory of one operand tile per stage: `rows` x `cols` bf16 plus padding.
template <int ROWS, int COLS>
struct DgSmemTile {
  static constexpr int kLd = COLS + 8;
  static constexpr int kElems = ROWS * kLd;
};

// Fragment addresses (Note [mma fragment layouts] in dg_mma.cuh). A thread's ldmatrix row address
// is its offset into the stage's tile, fixed for the launch, plus a compile-time step per 16-row
// (A) or 16-column (B) tile and 16-wide k slice.
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

// Note [Lean main loop]
// What a k-tile of the main loop issues per thread is settled before the loop starts, so that the
// loop is MMAs, ldmatrix and cp.async with little else (the target: at most 2.5
// instructions per MMA and no inner loop; tests/static/main_loop_test.cc reads the SASS):
// - Copies are planned once per thread (DgGemmTileCopy). A warp's copy instruction reads whole
//   32-byte sectors (at least two threads share a row), a thread's next chunk in a row is an
//   immediate offset of the same pointer, and each pass of rows has its own pointer. Rows past M
//   or N, when K runs along the tile's columns, read the last row inside instead of being
//   predicated (they only feed accumulators the epilogue never sees). A transposed operand's
//   columns past M or N are zero-filled by a per-chunk predicate from a mask computed once; only
//   blocks on that edge run the predicated variant.
// - The K residue goes first: tile 0 covers [k_begin, k_begin + r) with r = (k_end - k_begin) %
//   BK (a whole BK when that is 0) and is loaded in the prologue with per-chunk K predicates;
//   every later tile is whole, so an interior block's copies in the loop carry no predicate. K
//   extents are multiples of 8 (a precondition), so a chunk is inside K or outside as a whole.
// - Alignment is decided once per launch by one uniform branch: 16-byte aligned operands run the
//   pipeline (cp.async), the rest run dg_gemm_unaligned_loop (element loads into shared memory).
//   An unaligned launch gives the same results, slower; the host counts and logs it (Note
//   [Unaligned operands] in codegen/kernel_plan.h). That loop is kept small, because it is
//   rare (views at odd offsets) and compile time counts: one stage, its copies a rolled loop, its
//   k16 steps rolled. As a second pipeline with unrolled copies it was about a third of NVRTC's
//   time for the seed forward (the bar: a cold compile under 3 s). Generated GEMMs go
//   further: only their fallback kernel has the loop (kAlignedOnly; Note [GEMM fallbacks] in
//   codegen/kernel_plan.h), and the host sends an unaligned call there.
// - A stage is one buffer, A's tile then each B's, and stages rotate by one int offset; fragment
//   addresses are per-thread offsets plus compile-time steps. The block is one-dimensional, so
//   threadIdx.x is the thread's index (no blockDim reads) and copy loops unroll at compile time.

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

// The warp's MMAs on one stage; fa and fb are the thread's fragment addresses in it (DgGemmFragA,
// DgGemmFragB: B operand j's tile follows A's at kA + j * kB). UNROLL_K: the k16 steps unrolled
// (the pipeline); rolled, they are one step's code (dg_gemm_unaligned_loop).
template <class Tile, bool AT, bool BKN, int NB, bool UNROLL_K = true>
DG_DEVICE void dg_gemm_stage_mma(float (&acc)[NB][Tile::MT][Tile::NT][4], const dg_bf16* fa,
                                 const dg_bf16* fb) {
  constexpr int kB = DgGemmStageCopies<Tile, AT, BKN, NB>::kB;
#if defined(DG_ON_GPU)
#pragma unroll(UNROLL_K ? Tile::BK / 16 : 1)
#endif
  for (int kk = 0; kk < Tile::BK; kk += 16) {
    dg_u32 af[Tile::MT][4];
    DG_UNROLL
    for (int mt = 0; mt < Tile::MT; ++mt)
      dg_gemm_ldmatrix<AT>(af[mt], fa + DgGemmFragA<Tile, AT>::step(mt, kk));
    DG_UNROLL
    for (int j = 0; j < NB; ++j) {
      DG_UNROLL
      for (int nt = 0; nt < Tile::NT; nt += 2) {
        dg_u32 bf[4];
        dg_gemm_ldmatrix<BKN>(bf, fb + j * kB + DgGemmFragB<Tile, BKN>::step(nt, kk));
        const dg_u32 b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
        DG_UNROLL
        for (int mt = 0; mt < Tile::MT; ++mt) {
          dg_mma_m16n8k16_bf16(acc[j][mt][nt], af[mt], b0, acc[j][mt][nt]);
          dg_mma_m16n8k16_bf16(acc[j][mt][nt + 1], af[mt], b1, acc[j][mt][nt + 1]);
        }
      }
    }
  }
}

// p advanced by a byte offset (stage offsets in bytes save a shift per use).
template <class T>
DG_DEVICE T* dg_gemm_bytes_after(T* p, int bytes) {
  return reinterpret_cast<T*>(reinterpret_cast<char*>(p) + bytes);
}
template <class T>
DG_DEVICE const T* dg_gemm_bytes_after(const T* p, int bytes) {
  return reinterpret_cast<const T*>(reinterpret_cast<const char*>(p) + bytes);
}

// What both main loops set up first: the warp's fragment addresses in stage 0 (DgGemmFragA,
// DgGemmFragB), the number of BK tiles in [k_begin, k_end), and the length of tile 0, the K
// residue (a whole BK when BK divides the range, 0 for an empty one; Note [Lean main loop]).
template <class Tile, bool AT, bool BKN, int NB>
struct DgGemmWarpSetup {
  const dg_bf16* fa;
  const dg_bf16* fb;
  int k_tiles;
  long long residue;
  DG_DEVICE DgGemmWarpSetup(const dg_bf16* smem, long long k_begin, long long k_end) {
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;  // one-dimensional blocks
    const int wm = static_cast<int>(warp / Tile::kWarpsN) * Tile::WM;
    const int wn = static_cast<int>(warp % Tile::kWarpsN) * Tile::WN;
    fa = smem + DgGemmFragA<Tile, AT>::offset(wm, lane);
    fb = smem + DgGemmStageCopies<Tile, AT, BKN, NB>::kA + DgGemmFragB<Tile, BKN>::offset(wn, lane);
    const long long k_len = k_end > k_begin ? k_end - k_begin : 0;
    k_tiles = static_cast<int>((k_len + Tile::BK - 1) / Tile::BK);
    residue = k_len - static_cast<long long>(k_tiles > 0 ? k_tiles - 1 : 0) * Tile::BK;
  }
};

// The multi-stage pipeline over k in [k_begin, k_end) with the copies planned (Note [Lean main
// loop]), for 16-byte aligned operands (cp.async); EDGE: the block's tile may overhang M (AT) or N
// (BKN). smem holds kStages stages.
template <class Tile, bool AT, bool BKN, int NB, bool EDGE>
DG_DEVICE void dg_gemm_pipeline(float (&acc)[NB][Tile::MT][Tile::NT][4],
                                DgGemmStageCopies<Tile, AT, BKN, NB>& copies, dg_bf16* smem,
                                long long k_begin, long long k_end) {
  typedef DgGemmStageCopies<Tile, AT, BKN, NB> Copies;
  constexpr int kStage = Copies::kStage;
  constexpr int kStageBytes = 2 * kStage, kLastBytes = (Tile::kStages - 1) * kStageBytes;
  const DgGemmWarpSetup<Tile, AT, BKN, NB> setup(smem, k_begin, k_end);
  const dg_bf16 *const fa = setup.fa, *const fb = setup.fb;
  const int k_tiles = setup.k_tiles;
  // Prologue: the K residue as tile 0, then whole tiles; kStages - 1 commit groups in all (empty
  // groups are fine).
  if (k_tiles > 0) {
    copies.template copy<false, EDGE>(smem, k_begin, k_begin + setup.residue);
    copies.advance(setup.residue);
  }
  dg_cp_async_commit();
  DG_UNROLL
  for (int s = 1; s < Tile::kStages - 1; ++s) {
    if (s < k_tiles) {
      copies.template copy<true, EDGE>(smem + s * kStage, 0, 0);
      copies.advance(Tile::BK);
    }
    dg_cp_async_commit();
  }
  int read = 0, write = kLastBytes;  // byte offsets of the stages read and written
  // Not unrolled: one k-tile per iteration keeps every variant's loop the same shape (and the
  // code small); its overhead is a few instructions (Note [Lean main loop]).
  DG_NO_UNROLL
  for (int kt = 0; kt < k_tiles; ++kt) {
    dg_cp_async_wait<Tile::kStages - 2>();  // tile kt has landed for this thread...
    __syncthreads();  // ...and for every thread; stage `write` (read at kt - 1) is free again
    if (kt + Tile::kStages - 1 < k_tiles) {
      copies.template copy<true, EDGE>(dg_gemm_bytes_after(smem, write), 0, 0);
      copies.advance(Tile::BK);
    }
    dg_cp_async_commit();
    dg_gemm_stage_mma<Tile, AT, BKN, NB>(acc, dg_gemm_bytes_after(fa, read),
                                         dg_gemm_bytes_after(fb, read));
    read = read == kLastBytes ? 0 : read + kStageBytes;
    write = write == kLastBytes ? 0 : write + kStageBytes;
  }
}

// The loop for operands that are not 16-byte aligned (Note [Lean main loop]): one stage, copied
// with element loads (each tile's K range checked), then its MMAs with the k16 steps rolled. Kept
// small because it is rare; the same tiles in the same order as dg_gemm_pipeline.
template <class Tile, bool AT, bool BKN, int NB, bool EDGE>
DG_DEVICE void dg_gemm_unaligned_loop(float (&acc)[NB][Tile::MT][Tile::NT][4],
                                      DgGemmStageCopies<Tile, AT, BKN, NB>& copies, dg_bf16* smem,
                                      long long k_begin, long long k_end) {
  const DgGemmWarpSetup<Tile, AT, BKN, NB> setup(smem, k_begin, k_end);
  const dg_bf16 *const fa = setup.fa, *const fb = setup.fb;
  const int k_tiles = setup.k_tiles;
  long long k0 = k_begin, k1 = k_begin + setup.residue;  // tile kt's K range; the residue first
  DG_NO_UNROLL
  for (int kt = 0; kt < k_tiles; ++kt) {
    copies.template copy_unaligned<EDGE>(smem, k0, k1);
    copies.advance(k1 - k0);
    __syncthreads();  // the stage is filled
    dg_gemm_stage_mma<Tile, AT, BKN, NB, false>(acc, fa, fb);
    __syncthreads();  // and read, before the next tile overwrites it
    k0 = k1;
    k1 += Tile::BK;
  }
}

// The main loop's shared memory, kStages stages: one array per instantiation, so the K segments of
// one kernel share it. Free for other use once dg_gemm_mainloop returns (the staged rank-r
// epilogue copies its operands there: Note [Staged rank-r epilogue] in dg_epilogue.cuh).
template <class Tile, bool AT, bool BKN, int NB>
DG_DEVICE dg_bf16* dg_gemm_smem() {
  __shared__ __align__(16)
      dg_bf16 dg_gemm_smem_stages[Tile::kStages * DgGemmStageCopies<Tile, AT, BKN, NB>::kStage];
  return dg_gemm_smem_stages;
}

// Accumulates the block tile at (m0, n0) over k in [k_begin, k_end) into acc (not zeroed here);
// b points at NB operand pointers. Every thread of the (one-dimensional) block must call it: it
// contains barriers. kAlignedOnly: the host has checked that every operand is 16-byte aligned
// (Note [GEMM fallbacks] in codegen/kernel_plan.h), so the element-load loop is left out.
template <class Tile, bool AT, bool BKN, int NB, bool kAlignedOnly = false>
DG_DEVICE void dg_gemm_mainloop(float (&acc)[NB][Tile::MT][Tile::NT][4], const dg_bf16* a,
                                long long lda, const dg_bf16* const* b, long long ldb, long long m0,
                                long long M, long long n0, long long N, long long k_begin,
                                long long k_end) {
  typedef DgGemmStageCopies<Tile, AT, BKN, NB> Copies;
  dg_bf16* const smem = dg_gemm_smem<Tile, AT, BKN, NB>();
  Copies copies;
  if (!AT)
    copies.a.init(a, lda, m0, M, k_begin, k_end);
  else
    copies.a.init(a, lda, k_begin, k_end, m0, M);
  bool aligned = (reinterpret_cast<unsigned long long>(a) & 15u) == 0;
  DG_UNROLL
  for (int j = 0; j < NB; ++j) {
    if (!BKN)
      copies.b[j].init(b[j], ldb, n0, N, k_begin, k_end);
    else
      copies.b[j].init(b[j], ldb, k_begin, k_end, n0, N);
    aligned = aligned && (reinterpret_cast<unsigned long long>(b[j]) & 15u) == 0;
  }
  // lda, ldb and k_begin are multiples of 8 elements (preconditions), so with aligned bases every
  // chunk is 16-byte aligned.
  // Blocks whose tiles lie inside M and N run a loop without the per-chunk predicates that a
  // transposed operand's overhang needs (a uniform branch; without AT or BKN there are none).
  constexpr bool kTransposed = AT || BKN;
  const bool edge = (AT && m0 + Tile::BM > M) || (BKN && n0 + Tile::BN > N);
  if (!kAlignedOnly && !aligned)
    dg_gemm_unaligned_loop<Tile, AT, BKN, NB, kTransposed>(acc, copies, smem, k_begin, k_end);
  else if (kTransposed && edge)
    dg_gemm_pipeline<Tile, AT, BKN, NB, true>(acc, copies, smem, k_begin, k_end);
  else
    dg_gemm_pipeline<Tile, AT, BKN, NB, false>(acc, copies, smem, k_begin, k_end);
  dg_cp_async_wait<0>();
  __syncthreads();  // shared memory may be reused by the caller (or the next mainloop) after this
}

// Where the thread's accumulator elements lie in the block tile (Note [mma fragment layouts] in
// dg_mma.cuh): element i of n8 tile nt of 16-row tile mt is at (row(mt, i), col(nt, i)).
template <class Tile>
struct DgGemmLane {
  int wm, wn, g, t;  // the warp's tile origin; the lane's group and thread in group
  DG_DEVICE DgGemmLane() {
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;  // one-dimensional blocks
    wm = static_cast<int>(warp / Tile::kWarpsN) * Tile::WM;
    wn = static_cast<int>(warp % Tile::kWarpsN) * Tile::WN;
    g = static_cast<int>(lane / 4);
    t = static_cast<int>(lane % 4);
  }
  DG_DEVICE int row(int mt, int i) const { return wm + 16 * mt + g + 8 * (i / 2); }
  DG_DEVICE int col(int nt, int i) const { return wn + 8 * nt + 2 * t + (i % 2); }

  // f(row, col, nt, i, half) for the elements of 16-row tile mt inside [0, M) x [0, N), a row's
  // two neighbouring columns one after the other, `half` the stores for that element (Note
  // [Paired stores] in dg_store.cuh).
  template <class Stores, class F>
  DG_DEVICE void for_elements(int mt, long long m0, long long M, long long n0, long long N,
                              Stores& stores, const F& f) const {
    DG_UNROLL
    for (int nt = 0; nt < Tile::NT; ++nt) {
      if constexpr (Stores::kPaired) {
        DG_UNROLL
        for (int i = 0; i < 4; i += 2) {
          const long long r = m0 + row(mt, i), c = n0 + col(nt, i);
          if (r < M)
            dg_store_columns(stores, c, N, [&](const auto& half, int h) {
              f(r, static_cast<int>(c) + h, nt, i + h, half);
            });
        }
      } else {
        // Element by element, each with its own bounds check (N may be odd). Not through
        // dg_store_columns's element branch: with it, ptxas gave the seed forward's sm_80 GEMMs
        // up to 170 registers instead of 150.
        DG_UNROLL
        for (int i = 0; i < 4; ++i) {
          const long long r = m0 + row(mt, i), c = n0 + col(nt, i);
          if (r < M && c < N) f(r, static_cast<int>(c), nt, i, stores);
        }
      }
    }
  }
};

// Calls epi(row, col, acc_0[, acc_1], half) for every element of the block tile inside
// [0, M) x [0, N), its stores through `stores` (Note [Paired stores] in dg_store.cuh).
template <class Tile, int NB, class Epi, class Stores>
DG_DEVICE void dg_gemm_epilogue(const float (&acc)[NB][Tile::MT][Tile::NT][4], long long m0,
                                long long M, long long n0, long long N, const Epi& epi,
                                Stores& stores) {
  const DgGemmLane<Tile> lane;
  DG_UNROLL
  for (int mt = 0; mt < Tile::MT; ++mt)
    lane.for_elements(mt, m0, M, n0, N, stores,
                      [&](long long row, int col, int nt, int i, const auto& half) {
                        if constexpr (NB == 1)
                          epi(row, col, acc[0][mt][nt][i], half);
                        else
                          epi(row, col, acc[0][mt][nt][i], acc[1][mt][nt][i], half);
                      });
}

// As above with every element stored at once by epi(row, col, acc_0[, acc_1]) itself.
template <class Tile, int NB, class Epi>
DG_DEVICE void dg_gemm_epilogue(const float (&acc)[NB][Tile::MT][Tile::NT][4], long long m0,
                                long long M, long long n0, long long N, const Epi& epi) {
  DgDirectStores direct;
  if constexpr (NB == 1)
    dg_gemm_epilogue<Tile, 1>(
        acc, m0, M, n0, N,
        [&](long long row, int col, float v, const DgDirectStores&) { epi(row, col, v); }, direct);
  else
    dg_gemm_epilogue<Tile, 2>(
        acc, m0, M, n0, N,
        [&](long long row, int col, float v0, float v1, const DgDirectStores&) {
          epi(row, col, v0, v1);
        },
        direct);
}

// As dg_gemm_epilogue, for an epilogue with NP rank-r products of rank K whose operands are staged
// in shared memory (Note [Staged rank-r epilogue] in dg_epilogue.cuh): staged[q] holds product
// q's [BM][K + 1] rows of U, then its [K][BN + 1] columns of B. Calls
// epi(row, col, acc_0[, acc_1], rank, half) with rank[q] product q's value at (row, col).
template <class Tile, int NB, int NP, int K, class Epi, class Stores>
DG_DEVICE void dg_gemm_epilogue_rank(const float (&acc)[NB][Tile::MT][Tile::NT][4], long long m0,
                                     long long M, long long n0, long long N,
                                     const float* const (&staged)[NP], const Epi& epi,
                                     Stores& stores) {
  const DgGemmLane<Tile> lane;
  DG_UNROLL
  for (int mt = 0; mt < Tile::MT; ++mt) {
    // Rows g and g + 8 of the 16-row tile mt; columns 2t and 2t + 1 of each n8 tile.
    float p[NP][2][Tile::NT][2];
    DG_UNROLL
    for (int q = 0; q < NP; ++q) DG_UNROLL
    for (int h = 0; h < 2; ++h) DG_UNROLL
    for (int nt = 0; nt < Tile::NT; ++nt) p[q][h][nt][0] = p[q][h][nt][1] = 0.0f;
    DG_NO_UNROLL
    for (int j = 0; j < K; ++j) {
      DG_UNROLL
      for (int q = 0; q < NP; ++q) {
        const float* u = staged[q] + lane.row(mt, 0) * (K + 1) + j;
        const float u0 = u[0], u1 = u[8 * (K + 1)];
        const float* w = staged[q] + Tile::BM * (K + 1) + j * (Tile::BN + 1) + lane.col(0, 0);
        DG_UNROLL
        for (int nt = 0; nt < Tile::NT; ++nt) {
          const float w0 = w[8 * nt], w1 = w[8 * nt + 1];
          p[q][0][nt][0] += u0 * w0;
          p[q][0][nt][1] += u0 * w1;
          p[q][1][nt][0] += u1 * w0;
          p[q][1][nt][1] += u1 * w1;
        }
      }
    }
    lane.for_elements(mt, m0, M, n0, N, stores,
                      [&](long long row, int col, int nt, int i, const auto& half) {
                        float rank[NP];
                        DG_UNROLL
                        for (int q = 0; q < NP; ++q) rank[q] = p[q][i / 2][nt][i % 2];
                        if constexpr (NB == 1)
                          epi(row, col, acc[0][mt][nt][i], rank, half);
                        else
                          epi(row, col, acc[0][mt][nt][i], acc[1][mt][nt][i], rank, half);
                      });
  }
}

// One block's tile of C = A * B (or of A * B0 and A * B1) with N and K fixed at compile time: tile
// (blockIdx.x, blockIdx.y) of the (M / BM) x (N / BN) grid, then the epilogue.
template <class Tile, int N, int K, bool AT, bool BKN, int NB, class Epi>
DG_DEVICE void dg_gemm_tc(const dg_bf16* a, long long lda, const dg_bf16* b0, const dg_bf16* b1,
                          long long ldb, long long M, const Epi& epi) {
  static_assert(NB == 1 || NB == 2, "one or two B operands");
  const long long m0 = static_cast<long long>(blockIdx.x) * Tile::BM;
  const long long n0 = static_cast<long long>(blockIdx.y) * Tile::BN;
  if (m0 >= M || n0 >= N) return;  // uniform over the block
  float acc[NB][Tile::MT][Tile::NT][4];
  DG_UNROLL
  for (int j = 0; j < NB; ++j) DG_UNROLL
  for (int mt = 0; mt < Tile::MT; ++mt) DG_UNROLL
  for (int nt = 0; nt < Tile::NT; ++nt) DG_UNROLL
  for (int i = 0; i < 4; ++i) acc[j][mt][nt][i] = 0.0f;
  const dg_bf16* const b[2] = {b0, b1};
  dg_gemm_mainloop<Tile, AT, BKN, NB>(acc, a, lda, b, ldb, m0, M, n0, N, 0, K);
  dg_gemm_epilogue<Tile, NB>(acc, m0, M, n0, N, epi);
}
