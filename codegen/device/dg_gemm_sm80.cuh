// Tensor-core GEMM mainloop: C[m][n] = sum_k A[m][k] * B[k][n], bf16 operands, fp32 accumulation,
// mma.sync.m16n8k16 fed by ldmatrix from shared memory that a multi-stage cp.async pipeline fills
// (sm_80 and later). This file is the main loop; its pieces are the tiles and fragment addresses
// (dg_gemm_tile_sm80.cuh), the copies (dg_gemm_copy_sm80.cuh) and the epilogue
// (dg_gemm_epilogue_sm80.cuh).
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
#include "dg_config.cuh"
#include "dg_cp_async_sm80.cuh"
#include "dg_gemm_copy_sm80.cuh"
#include "dg_gemm_epilogue_sm80.cuh"
#include "dg_gemm_tile_sm80.cuh"
#include "dg_mma_sm80.cuh"
#include "dg_types.cuh"

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

// The warp's MMAs on one stage; fa and fb are the thread's fragment addresses in it (DgGemmFragA,
// DgGemmFragB: B operand j's tile follows A's at kA + j * kB), at its slice's first k16 step (Note
// [Sliced K] in dg_gemm_tile_sm80.cuh). UNROLL_K: the k16 steps unrolled (the pipeline); rolled,
// they are one step's code (dg_gemm_unaligned_loop).
template <class Tile, bool AT, bool BKN, int NB, bool UNROLL_K = true>
DG_DEVICE void dg_gemm_stage_mma(float (&acc)[NB][Tile::MT][Tile::NT][4], const dg_bf16* fa,
                                 const dg_bf16* fb) {
  constexpr int kB = DgGemmStageCopies<Tile, AT, BKN, NB>::kB;
#if defined(DG_ON_GPU)
#pragma unroll(UNROLL_K ? Tile::BK / 16 / Tile::kSlicesK : 1)
#endif
  for (int kk = 0; kk < Tile::BK; kk += 16 * Tile::kSlicesK) {
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

// x, computed here: the compiler may neither recompute it nor move its computation into a loop.
// The sliced tiles' fragment offsets (from the warp and lane) were recomputed in every k-tile
// iteration, 20 instructions of 65 in the 32 x 64 tile's loop (Note [Sliced K]).
DG_DEVICE int dg_gemm_fixed(int x) {
#if defined(DG_ON_GPU)
  asm volatile("" : "+r"(x));
#endif
  return x;
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
    const unsigned tile = warp % Tile::kWarpTiles;
    const int wm = static_cast<int>(tile / Tile::kWarpsN) * Tile::WM;
    const int wn = static_cast<int>(tile % Tile::kWarpsN) * Tile::WN;
    const int kk = 16 * static_cast<int>(warp / Tile::kWarpTiles);  // the slice's first k16 step
    fa = smem + dg_gemm_fixed(DgGemmFragA<Tile, AT>::offset(wm, lane) +
                              DgGemmFragA<Tile, AT>::step(0, kk));
    fb = smem + DgGemmStageCopies<Tile, AT, BKN, NB>::kA +
         dg_gemm_fixed(DgGemmFragB<Tile, BKN>::offset(wn, lane) +
                       DgGemmFragB<Tile, BKN>::step(0, kk));
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

// The block tile's accumulators summed over its K slices, in the layout of Tile::Epilogue (Note
// [Sliced K] in dg_gemm_tile_sm80.cuh): slice s adds its values to a [BM][BN + 8] f32 buffer per
// B operand in the main loop's shared memory, s = 0 first, then every thread reads its epilogue
// elements. Without slices a copy. Every thread of the block must call it after the main loop;
// the shared memory is free again when it returns.
template <class Tile, bool AT, bool BKN, int NB>
DG_DEVICE void dg_gemm_sum_slices(const float (&acc)[NB][Tile::MT][Tile::NT][4],
                                  float (&sum)[NB][Tile::Epilogue::MT][Tile::Epilogue::NT][4]) {
  typedef typename Tile::Epilogue Out;
  if constexpr (Tile::kSlicesK == 1) {
    DG_UNROLL
    for (int j = 0; j < NB; ++j) DG_UNROLL
    for (int mt = 0; mt < Tile::MT; ++mt) DG_UNROLL
    for (int nt = 0; nt < Tile::NT; ++nt) DG_UNROLL
    for (int i = 0; i < 4; ++i) sum[j][mt][nt][i] = acc[j][mt][nt][i];
  } else {
    // Rows BN + 8 floats apart: a warp's stores (row g, column 2t + e) fall in banks 8g + 2t + e.
    constexpr int kLd = Tile::BN + 8, kPlane = Tile::BM * kLd;
    static_assert(
        4 * NB * kPlane <= 2 * Tile::kStages * DgGemmStageCopies<Tile, AT, BKN, NB>::kStage,
        "the slices' sum fits the main loop's stages");
    float* const buffer = reinterpret_cast<float*>(dg_gemm_smem<Tile, AT, BKN, NB>());
    const int slice = static_cast<int>(threadIdx.x / 32 / Tile::kWarpTiles);
    const DgGemmLane<Tile> lane;
    for (int s = 0; s < Tile::kSlicesK; ++s) {
      if (slice == s) {
        DG_UNROLL
        for (int j = 0; j < NB; ++j) DG_UNROLL
        for (int mt = 0; mt < Tile::MT; ++mt) DG_UNROLL
        for (int nt = 0; nt < Tile::NT; ++nt) DG_UNROLL
        for (int i = 0; i < 4; ++i) {
          float* const p = buffer + j * kPlane + lane.row(mt, i) * kLd + lane.col(nt, i);
          *p = s == 0 ? acc[j][mt][nt][i] : *p + acc[j][mt][nt][i];
        }
      }
      __syncthreads();
    }
    const DgGemmLane<Out> out;
    DG_UNROLL
    for (int j = 0; j < NB; ++j) DG_UNROLL
    for (int mt = 0; mt < Out::MT; ++mt) DG_UNROLL
    for (int nt = 0; nt < Out::NT; ++nt) DG_UNROLL
    for (int i = 0; i < 4; ++i)
      sum[j][mt][nt][i] = buffer[j * kPlane + out.row(mt, i) * kLd + out.col(nt, i)];
    __syncthreads();  // read by every thread before the caller reuses the shared memory
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
  float sum[NB][Tile::Epilogue::MT][Tile::Epilogue::NT][4];
  dg_gemm_sum_slices<Tile, AT, BKN, NB>(acc, sum);
  dg_gemm_epilogue<typename Tile::Epilogue, NB>(sum, m0, M, n0, N, epi);
}
