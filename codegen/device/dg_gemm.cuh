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
// - Bounds. Rows m >= M, n >= N and k >= K are zero-filled in shared memory (cp.async src-size 0),
//   so M = 0, 1, ragged and huge are all correct; the epilogue is called only for m < M, n < N.
// - Two B operands (NB = 2) share the A tile: the horizontal gate/up fusion. The epilogue then
//   gets acc for B0 and acc for B1 of the same (row, col).
// - dg_gemm_mainloop takes the K range at run time ([k_begin, k_end)), for GEMMs whose reduction
//   runs over the token count and for split-K; dg_gemm_tc fixes N and K at compile time.
#pragma once
#include "dg_async.cuh"
#include "dg_config.cuh"
#include "dg_mma.cuh"
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

// Copies a ROWS x COLS tile (COLS contiguous in global memory) into smem, 8 elements (16 bytes)
// per copy. Element (r, c) of the tile is src[(r0 + r) * ld + c0 + c]; rows >= row_end and columns
// >= col_end are zero.
template <int ROWS, int COLS, int THREADS>
DG_DEVICE void dg_gemm_load_tile(dg_bf16* smem, const dg_bf16* src, long long ld, long long r0,
                                 long long row_end, long long c0, long long col_end, bool aligned) {
  constexpr int kChunksPerRow = COLS / 8, kChunks = ROWS * kChunksPerRow;
  static_assert(COLS % 8 == 0, "16-byte chunks");
  for (int i = dg_thread_linear(); i < kChunks; i += THREADS) {
    const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * 8;
    dg_bf16* dst = smem + r * DgSmemTile<ROWS, COLS>::kLd + c;
    const bool inside = r0 + r < row_end && c0 + c < col_end;
    const dg_bf16* g = inside ? src + (r0 + r) * ld + c0 + c : src;
    if (aligned) {
      dg_cp_async_16_zfill(dst, g, inside);
    } else {
      for (int e = 0; e < 8; ++e)
        dst[e] = (inside && c0 + c + e < col_end) ? g[e] : dg_bf16_from_bits(0);
    }
  }
}

// Loads the tile of A (BM x BK) and of each B (BN x BK) for the K slice starting at k0.
template <class Tile, bool AT, bool BKN, int NB>
DG_DEVICE void dg_gemm_load_stage(dg_bf16* sa, dg_bf16* sb, const dg_bf16* a, long long lda,
                                  const dg_bf16* const* b, long long ldb, long long m0, long long M,
                                  long long n0, long long N, long long k0, long long k_end,
                                  bool aligned) {
  constexpr int T = Tile::kThreads;
  if (!AT)
    dg_gemm_load_tile<Tile::BM, Tile::BK, T>(sa, a, lda, m0, M, k0, k_end, aligned);
  else
    dg_gemm_load_tile<Tile::BK, Tile::BM, T>(sa, a, lda, k0, k_end, m0, M, aligned);
  for (int j = 0; j < NB; ++j) {
    dg_bf16* dst = sb + j * (BKN ? DgSmemTile<Tile::BK, Tile::BN>::kElems
                                 : DgSmemTile<Tile::BN, Tile::BK>::kElems);
    if (!BKN)
      dg_gemm_load_tile<Tile::BN, Tile::BK, T>(dst, b[j], ldb, n0, N, k0, k_end, aligned);
    else
      dg_gemm_load_tile<Tile::BK, Tile::BN, T>(dst, b[j], ldb, k0, k_end, n0, N, aligned);
  }
}

// The warp's A fragments for rows [wm, wm + 16) and k slice [kk, kk + 16) (Note [mma fragment
// layouts] in dg_mma.cuh).
template <class Tile, bool AT>
DG_DEVICE void dg_gemm_frag_a(dg_u32 (&r)[4], const dg_bf16* sa, int wm, int kk, unsigned lane) {
  if (!AT) {
    constexpr int ld = DgSmemTile<Tile::BM, Tile::BK>::kLd;
    dg_ldmatrix_x4(r, sa + (wm + lane % 16) * ld + kk + (lane / 16) * 8);
  } else {  // stored [k][m]: matrix j = lane / 8 covers m + (j % 2) * 8, k + (j / 2) * 8
    constexpr int ld = DgSmemTile<Tile::BK, Tile::BM>::kLd;
    dg_ldmatrix_x4_trans(r,
                         sa + (kk + (lane / 16) * 8 + lane % 8) * ld + wm + ((lane / 8) % 2) * 8);
  }
}

// B fragments of two n8 tiles, columns [wn, wn + 16): r[0..1] for the first, r[2..3] the second.
template <class Tile, bool BKN>
DG_DEVICE void dg_gemm_frag_b(dg_u32 (&r)[4], const dg_bf16* sb, int wn, int kk, unsigned lane) {
  if (!BKN) {
    constexpr int ld = DgSmemTile<Tile::BN, Tile::BK>::kLd;
    dg_ldmatrix_x4(r, sb + (wn + (lane / 16) * 8 + lane % 8) * ld + kk + ((lane / 8) % 2) * 8);
  } else {
    constexpr int ld = DgSmemTile<Tile::BK, Tile::BN>::kLd;
    dg_ldmatrix_x4_trans(r,
                         sb + (kk + ((lane / 8) % 2) * 8 + lane % 8) * ld + wn + (lane / 16) * 8);
  }
}

// Accumulates the block tile at (m0, n0) over k in [k_begin, k_end) into acc (not zeroed here);
// b points at NB operand pointers.
// Every thread of the block must call it (it contains barriers).
template <class Tile, bool AT, bool BKN, int NB>
DG_DEVICE void dg_gemm_mainloop(float (&acc)[NB][Tile::MT][Tile::NT][4], const dg_bf16* a,
                                long long lda, const dg_bf16* const* b, long long ldb, long long m0,
                                long long M, long long n0, long long N, long long k_begin,
                                long long k_end) {
  constexpr int kA =
      AT ? DgSmemTile<Tile::BK, Tile::BM>::kElems : DgSmemTile<Tile::BM, Tile::BK>::kElems;
  constexpr int kB =
      BKN ? DgSmemTile<Tile::BK, Tile::BN>::kElems : DgSmemTile<Tile::BN, Tile::BK>::kElems;
  __shared__ __align__(16) dg_bf16 dg_gemm_smem_a[Tile::kStages * kA];
  __shared__ __align__(16) dg_bf16 dg_gemm_smem_b[Tile::kStages * NB * kB];
  bool aligned = (reinterpret_cast<unsigned long long>(a) & 15u) == 0;
  for (int j = 0; j < NB; ++j)
    aligned = aligned && (reinterpret_cast<unsigned long long>(b[j]) & 15u) == 0;

  const unsigned lane = dg_lane_id(), warp = dg_warp_id();
  const int wm = static_cast<int>(warp / Tile::kWarpsN) * Tile::WM;
  const int wn = static_cast<int>(warp % Tile::kWarpsN) * Tile::WN;
  const long long k_tiles = k_end > k_begin ? (k_end - k_begin + Tile::BK - 1) / Tile::BK : 0;

  // Prologue: stages 0 .. kStages-2 in flight, one commit group each (empty groups are fine).
  for (int s = 0; s < Tile::kStages - 1; ++s) {
    if (s < k_tiles)
      dg_gemm_load_stage<Tile, AT, BKN, NB>(dg_gemm_smem_a + s * kA, dg_gemm_smem_b + s * NB * kB,
                                            a, lda, b, ldb, m0, M, n0, N, k_begin + s * Tile::BK,
                                            k_end, aligned);
    dg_cp_async_commit();
  }
  for (long long kt = 0; kt < k_tiles; ++kt) {
    dg_cp_async_wait<Tile::kStages - 2>();  // tile kt has landed for this thread...
    __syncthreads();  // ...and for every thread; stage (kt - 1) % kStages is no longer read
    const long long next = kt + Tile::kStages - 1;
    if (next < k_tiles) {
      const int s = static_cast<int>(next % Tile::kStages);
      dg_gemm_load_stage<Tile, AT, BKN, NB>(dg_gemm_smem_a + s * kA, dg_gemm_smem_b + s * NB * kB,
                                            a, lda, b, ldb, m0, M, n0, N, k_begin + next * Tile::BK,
                                            k_end, aligned);
    }
    dg_cp_async_commit();
    const int s = static_cast<int>(kt % Tile::kStages);
    const dg_bf16* sa = dg_gemm_smem_a + s * kA;
    const dg_bf16* sb = dg_gemm_smem_b + s * NB * kB;
    DG_UNROLL
    for (int kk = 0; kk < Tile::BK; kk += 16) {
      dg_u32 af[Tile::MT][4];
      DG_UNROLL
      for (int mt = 0; mt < Tile::MT; ++mt)
        dg_gemm_frag_a<Tile, AT>(af[mt], sa, wm + 16 * mt, kk, lane);
      DG_UNROLL
      for (int j = 0; j < NB; ++j) {
        DG_UNROLL
        for (int nt = 0; nt < Tile::NT; nt += 2) {
          dg_u32 bf[4];
          dg_gemm_frag_b<Tile, BKN>(bf, sb + j * kB, wn + 8 * nt, kk, lane);
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
  dg_cp_async_wait<0>();
  __syncthreads();  // shared memory may be reused by the caller (or the next mainloop) after this
}

// Calls epi(row, col, acc_0[, acc_1]) for every element of the block tile inside [0, M) x [0, N).
template <class Tile, int NB, class Epi>
DG_DEVICE void dg_gemm_epilogue(const float (&acc)[NB][Tile::MT][Tile::NT][4], long long m0,
                                long long M, long long n0, long long N, const Epi& epi) {
  const unsigned lane = dg_lane_id(), warp = dg_warp_id();
  const int wm = static_cast<int>(warp / Tile::kWarpsN) * Tile::WM;
  const int wn = static_cast<int>(warp % Tile::kWarpsN) * Tile::WN;
  const int g = static_cast<int>(lane / 4), t = static_cast<int>(lane % 4);
  DG_UNROLL
  for (int mt = 0; mt < Tile::MT; ++mt) {
    DG_UNROLL
    for (int nt = 0; nt < Tile::NT; ++nt) {
      DG_UNROLL
      for (int i = 0; i < 4; ++i) {
        const long long row = m0 + wm + 16 * mt + g + 8 * (i / 2);
        const long long col = n0 + wn + 8 * nt + 2 * t + (i % 2);
        if (row >= M || col >= N) continue;
        if constexpr (NB == 1)
          epi(row, static_cast<int>(col), acc[0][mt][nt][i]);
        else
          epi(row, static_cast<int>(col), acc[0][mt][nt][i], acc[1][mt][nt][i]);
      }
    }
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
