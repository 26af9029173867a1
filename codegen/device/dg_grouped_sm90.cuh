// The grouped GEMM's block on sm_90a (codegen/emit_grouped_wgmma.cc): the warp-specialized wgmma
// + TMA main loop of dg_gemm_sm90.cuh over one row tile of one expert's segment.
//
// Note [Grouped wgmma tile]
// A block is a row tile of the worst-case grid (Note [Grouped tile schedule] in dg_grouped.cuh):
// the kernel finds its segment and rows [m0, m_end) from the offsets before anything else (each
// warp on its own, 32 offsets a round: dg_grouped_tile_by_warp), and a surplus tile leaves before
// the barriers are set up. The segment past offs[E-1] runs the same code over no k tiles: its
// accumulators stay zero and the epilogue stores them. Then:
// - A is one map over all R routed rows [R][K]: the box at row m0 holds BM rows, of which those
//   past the segment's end belong to the next expert (multiplied, never stored) and those past R
//   are the TMA's zero fill. The epilogue stores rows < m_end only.
// - B is expert e's weight through a map chosen before the main loop: one map over the fused
//   [E x N][K] parameter, expert e's rows starting at e N (the producer's column coordinate is
//   e N + n0; a box overhanging N reads expert e + 1's rows, which land in columns >= N, never
//   stored), or expert e's own map (E separate weights, or a fused [E][K][N] parameter, whose
//   slices must end at K so that the last k tile's overhang reads zeros).
// - The output is stored in pairs of columns (N even; the host checks the output's alignment,
//   Note [Unaligned operands] in codegen/kernel_plan.h).
// - Bad offsets end the launch as in dg_grouped_tile, but on a GPU without the message: a printf
//   is a function call, and ptxas serializes every wgmma of a kernel that holds one (C7510). The
//   emulation still names the offset.
// Everything else is the main loop of Note [Warp-specialized main loop]: one K segment, one B.
#pragma once
#include "dg_gemm_sm90.cuh"
#include "dg_grouped.cuh"

#if defined(DG_HAS_DEVICE) && (defined(DG_HOST_EMULATION) || defined(__CUDA_ARCH_FEAT_SM90_ALL))

#if defined(DG_ON_GPU)
#define DG_GROUPED_QUIET_TRAP(format, ...) __trap()
#else
#define DG_GROUPED_QUIET_TRAP(format, ...) ::dg::emu::debug_trap(format, __VA_ARGS__)
#endif

// dg_grouped_tile (Note [Grouped tile schedule]) by one warp: segment s = base + lane of each
// round of 32 (E + 1 segments, the last the rows past offs[E-1]), its tiles' first index a prefix
// sum over the lanes, so a round costs one load a lane instead of 32 loads in turn. The same
// result in every lane, and the same checks, the first bad offset reported.
template <int E>
DG_DEVICE int dg_grouped_tile_by_warp(const int* offs, long long R, long long tile, int BM,
                                      long long* m0, long long* m_end) {
  // Offsets and tile indices are ints: offsets hold row counts, R <= 2^31 - 1 (the code
  // generator's check), and tile < R / BM + E + 1.
  const unsigned all = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32), rows = static_cast<int>(R);
  const int t = static_cast<int>(tile);
  int first = 0, prev = 0;  // the tiles and the rows of the rounds before
  int found = -1;
  DG_UNROLL
  for (int base = 0; base <= E; base += 32) {
    const int s = base + lane;
    const int end = s < E ? offs[s] : rows;
    int start = __shfl_up_sync(all, end, 1);
    if (lane == 0) start = prev;
    const unsigned bad = __ballot_sync(all, s < E && (end < start || end > rows));
    if (bad) {
      const int l = __ffs(static_cast<int>(bad)) - 1;
      DG_GROUPED_QUIET_TRAP(DG_BAD_OFFSETS_MESSAGE, base + l,
                            static_cast<long long>(__shfl_sync(all, end, l)), R);
    }
    const int tiles = s <= E ? (end - start + BM - 1) / BM : 0;
    int last = tiles;  // inclusive prefix sum of the lanes' tiles
    DG_UNROLL
    for (int d = 1; d < 32; d *= 2) {
      const int v = __shfl_up_sync(all, last, d);
      if (lane >= d) last += v;
    }
    const int mine = first + last - tiles;
    const unsigned hit = __ballot_sync(all, t >= mine && t < mine + tiles);
    if (found < 0 && hit) {
      const int l = __ffs(static_cast<int>(hit)) - 1;
      found = base + l;
      *m0 = __shfl_sync(all, start + (t - mine) * BM, l);
      *m_end = __shfl_sync(all, end, l);
    }
    first = __shfl_sync(all, first + last, 31);
    prev = __shfl_sync(all, end, 31);
  }
  return found;
}

// The consumer's accumulators inside rows [m0, m_end) and columns [n0, N), as bf16 pairs: d[i]
// and d[i + 1] (i even) are neighbouring columns of one row (Note [wgmma layouts]).
template <class Tile>
DG_DEVICE void dg_grouped_wgmma_store(dg_bf16* out, const float (&acc)[1][Tile::BN / 2],
                                      long long m0, long long m_end, long long n0, long long N) {
  const int T = static_cast<int>(threadIdx.x % 128);
  const long long rows = m0 + 64 * static_cast<long long>(threadIdx.x / 128);
  DG_UNROLL
  for (int i = 0; i < Tile::BN / 2; i += 2) {
    const long long r = rows + dg_wgmma_acc_row(T, i), c = n0 + dg_wgmma_acc_col(T, i);
    if (r < m_end && c < N)
      dg_store_pair(out + r * N + c, dg_convert<dg_bf16>(acc[0][i]).bits,
                    dg_convert<dg_bf16>(acc[0][i + 1]));
  }
}

// Note [Grouped wgmma tile]: the block's rows [m0, m_end) x columns [n0, n0 + BN) of
// out = a @ w_e^T (or a @ w_e), A through a_map, B through b_map at column coordinate b_n0 (n0
// within expert e's map, e N + n0 within the fused one); K = 0 stores zeros. The producer's and the
// consumers' paths stay apart to the end (Note [Warpgroup register counts] in dg_wgmma_sm90.cuh).
template <class Tile>
DG_DEVICE void dg_grouped_wgmma_tile(dg_bf16* out, const DgTensorMap* a_map,
                                     const DgTensorMap* b_map, long long b_n0, long long m0,
                                     long long m_end, long long n0, long long N, long long K) {
  const DgTensorMap* const a_maps[1] = {a_map};
  const DgTensorMap* const b_maps[1][1] = {{b_map}};
  const long long seg_k[1] = {K};
  dg_wgmma_init_barriers<Tile>();
  if (dg_wgmma_is_producer<Tile>()) {
    dg_wgmma_mainloop_producer<Tile, 1>(a_maps, b_maps, seg_k, m0, b_n0);
  } else {
    float acc[1][Tile::BN / 2];
    dg_wgmma_mainloop_consumer<Tile>(acc, Tile::k_tiles(K));
    dg_grouped_wgmma_store<Tile>(out, acc, m0, m_end, n0, N);
  }
}

#endif  // wgmma available
