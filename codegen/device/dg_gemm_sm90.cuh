// The sm_90a GEMM main loop: warp-specialized, TMA loads into a ring of shared-memory stages
// guarded by mbarriers, wgmma consumers (Note [Warp-specialized main loop]). The code generator
// emits it for sm_90a (Note [sm_90a GEMMs] in codegen/emit_wgmma.cc).
//
// Note [Warp-specialized main loop]
// - A block of kConsumers + 1 warpgroups computes a BM x BN tile of C_j = A B_j^T for NB (1 or
//   2) B operands sharing A, A [M][K] K-major (activations), K in steps of 64: one 128-byte
//   swizzle row of bf16, so each stage holds A's BM rows as 128-byte swizzle atoms (Note [TMA
//   box copies] in dg_tma_sm90.cuh), SBO 1024, and a k16 step is 32 bytes further into the rows
//   (Note [wgmma layouts] in dg_wgmma_sm90.cuh).
// - B_j is K-major ([N][K], a linear layer's weight) and stored like A, or, with kBMnMajor,
//   N-major ([K][N]: the weight as the backward's dgrad reads it). Then a stage holds BN / 64
//   boxes of 64 K rows of 64 columns (128 bytes, one swizzle row), 8 KB apart: LBO 8192 steps
//   along N between them, SBO 1024 between groups of 8 K rows, and a k16 step is 16 K rows, 2048
//   bytes further (imm-trans-b = 1).
// - The last warpgroup is the producer: one thread waits for a stage to be free (its `empty`
//   barrier), expects the stage's bytes on its `full` barrier and issues the 1 + NB TMA boxes. The
//   boxes overhang M and K with zeros (the TMA fill), so ragged tiles need no predicates, and M
//   is a run-time value: a block past M is never launched, a partial one computes zeros there.
// - Each consumer warpgroup owns 64 rows: it waits for `full`, issues four k16 wgmmas into its
//   NB x BN / 2 accumulators per thread (Note [Stacked B operands]), commits them, and waits for
//   all but that group, so the previous k tile's wgmmas have retired; then each of its warps frees
//   that tile's stage (one arrival per warp: a wait retires the waiting warp's part, so one warp's
//   leader freeing the stage for all of them let the producer overwrite it under another warp's
//   wgmma; the adversarial emulation found that). Stages rotate every k tile; the phase parity of a
//   stage's barriers is its round (tile / STAGES).
//   The producer's first round waits on parity 1, which an untouched barrier reports complete.
//   After the loop each consumer warp frees the last tile's stage as well.
// - The producer warpgroup stays to the end: its leader issues every tile's boxes, then waits for
//   the frees of the last round (the `empty` waits of the kStages tiles after the last), so when
//   the producer leaves the main loop every stage is free and no copy is in flight. Its branch
//   runs to the kernel's end apart from the consumers' (no early return, no epilogue). With two
//   consumers it first gives registers back and they take them (Note [Warpgroup register counts]
//   in dg_wgmma_sm90.cuh): kProducerRegs and kConsumerRegs below.
// - K segments (Note [K-concatenated GEMMs]): one accumulator over NSEG K ranges, each with its
//   own maps. The producer walks the segments' k tiles in order, ceil(K_s / 64) each (the box
//   overhanging a segment's K reads zeros, from A and B alike); the consumers see one sequence of
//   tiles and never learn where a segment ends.
#pragma once
#include "dg_config.cuh"
#include "dg_epilogue_loads.cuh"
#include "dg_mbarrier_sm90.cuh"
#include "dg_store.cuh"
#include "dg_tma_sm90.cuh"
#include "dg_types.cuh"
#include "dg_wgmma_sm90.cuh"
#if defined(DG_HAS_DEVICE)
#include "dg_sync.cuh"  // dg_dynamic_smem
#endif

template <int BM_, int BN_, int STAGES_, int NB_ = 1, bool B_MN_MAJOR_ = false>
struct DgWgmmaTile {
  static constexpr int BM = BM_, BN = BN_, kStages = STAGES_, NB = NB_;
  static constexpr bool kBMnMajor = B_MN_MAJOR_;
  static constexpr int kBK = 64;  // one 128-byte swizzle row of bf16
  static constexpr int kConsumers = BM / 64;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kStageA = BM * kBK * 2, kStageB = BN * kBK * 2;
  static constexpr int kStage = kStageA + NB * kStageB;
  // The stages, then each stage's full and empty barriers, then the `staged` barrier (Note
  // [Rank-r staging beside the main loop]).
  static constexpr int kSmemBytes = kStages * kStage + (2 * kStages + 1) * 8;
  // The producer warpgroup's warps 1-3, which stage the rank-r operands while warp 0's leader
  // issues the copies.
  static constexpr int kStagingThreads = 96;
  static_assert(BM == 64 || BM == 128, "one or two consumer warpgroups of 64 rows");
  static_assert(BN == 16 || BN == 32 || BN == 64 || BN == 128 || BN == 256,
                "an N the wgmma instruction set covers (dg_wgmma_sm90.cuh)");
  static_assert(kStages >= 2, "at least two stages, so loads overlap the MMAs");
  static_assert(NB == 1 || NB == 2, "one B operand, or two sharing A");
  static_assert(kStageA % 1024 == 0 && kStageB % 1024 == 0,
                "tiles on 1024-byte boundaries for the 128-byte swizzle");
  static_assert(!kBMnMajor || BN % 64 == 0, "an N-major B tile is whole 64-column boxes");
  // An N-major B box: 64 K rows of 64 columns (one 128-byte swizzle row each).
  static constexpr int kBoxBytesMn = kBK * 64 * 2;
  // B's descriptor: its LBO (unused K-major) and how far a k16 step moves its start, in the
  // descriptor's 16-byte units: 32 bytes along a K-major row, 16 rows of 128 bytes N-major.
  static constexpr unsigned kBLbo = kBMnMajor ? kBoxBytesMn : 16;
  static constexpr int kBStep = kBMnMajor ? 2048 / 16 : 32 / 16;
  // Note [Stacked B operands]
  // One wgmma of N = NB x BN over the B tiles, which lie one after the other in a stage (kStageB =
  // BN x 128 bytes: BN K-major rows, or BN / 64 N-major boxes, so B_1's rows or boxes continue
  // B_0's under the same SBO and LBO), when the instruction has room; its accumulators d[NB BN / 2]
  // are acc[NB][BN / 2] in order, acc[j][i] at column j BN + (the column of i) (Note [wgmma
  // layouts]). A is then read from shared memory once per k16 step instead of NB times.
  static constexpr int kMmaN = NB * BN <= 256 ? NB * BN : BN;
  static constexpr int kMmas = NB * BN / kMmaN;
  // Note [Warpgroup register counts] with two consumers: 168 registers a thread at entry
  // (__launch_bounds__(384, 1)); the producer keeps 40 (CUTLASS's sm90 warp-specialized kernels
  // use the same pair) and the consumers take 232: 128 (40 + 2 x 232) = 64512 of 65536. Enough
  // for 128 accumulators a thread (NB x BN = 256) beside the epilogue's. One consumer has 255 at
  // entry (__launch_bounds__(256, 1)) already.
  static constexpr bool kRebalance = kConsumers == 2;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static_assert(128 * (kProducerRegs + kConsumers * kConsumerRegs) <= 65536,
                "the register file holds the rebalanced warpgroups");
  // k tiles of a K range.
  static DG_DEVICE int k_tiles(long long k) { return static_cast<int>((k + kBK - 1) / kBK); }
};

// The shared memory of a tile's staged rank-r products: NP products of KS k16 steps each (Note
// [Rank-r products on tensor cores]).
template <class Tile, int NP, int KS>
struct DgWgmmaRank {
  static constexpr int kSteps = 2 * KS * NP;
  static constexpr int kKTiles = (kSteps + 3) / 4;
  static constexpr int kOffset = (Tile::kSmemBytes + 1023) / 1024 * 1024;
  static constexpr int kBOffset = kKTiles * Tile::BM * 128;  // the B (W) tiles, after A's
  static constexpr int kBytes = kKTiles * (Tile::BM + Tile::BN) * 128;
  static_assert(NP >= 1 && KS >= 1, "at least one product of rank 1 or more");
};

#if defined(DG_HAS_DEVICE) && (defined(DG_HOST_EMULATION) || defined(__CUDA_ARCH_FEAT_SM90_ALL))

// The main loop in three parts, which the kernel calls as
//   dg_wgmma_init_barriers<Tile>();
//   if (dg_wgmma_is_producer<Tile>()) dg_wgmma_mainloop_producer<Tile, NSEG>(...);
//   else { dg_wgmma_mainloop_consumer<Tile>(acc, k_tiles); epilogue }
// so that the producer's path never joins the consumers': ptxas allocates each path under its own
// setmaxnreg (Note [Warpgroup register counts]), and code where the two met ran under the
// producer's limit (a consumer epilogue after a shared return spilled 600-1100 bytes).
// Every thread of the block calls dg_wgmma_init_barriers, with Tile::kSmemBytes of dynamic shared
// memory: the stages, then each stage's full and empty barriers.
template <class Tile>
DG_DEVICE dg_u64* dg_wgmma_full_barriers() {
  return reinterpret_cast<dg_u64*>(dg_dynamic_smem() + Tile::kStages * Tile::kStage);
}

template <class Tile>
DG_DEVICE void dg_wgmma_init_barriers() {
  dg_u64* const full = dg_wgmma_full_barriers<Tile>();
  dg_u64* const empty = full + Tile::kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < Tile::kStages; ++s) {
      dg_mbarrier_init(&full[s], 1);
      dg_mbarrier_init(&empty[s], 4 * Tile::kConsumers);  // one arrival per consumer warp
    }
    dg_mbarrier_init(empty + Tile::kStages, Tile::kStagingThreads);  // `staged`
    dg_fence_barrier_init();
  }
  __syncthreads();
}

template <class Tile>
DG_DEVICE bool dg_wgmma_is_producer() {
  return static_cast<int>(threadIdx.x / 128) == Tile::kConsumers;
}

// Note [Rank-r staging beside the main loop]
// A kernel whose epilogue reads staged rank-r operands (Note [Staged rank-r epilogue] in
// dg_epilogue.cuh) copies them with the producer warpgroup's idle warps 1-3 (dg_wgmma_is_stager)
// while warp 0's leader issues the main loop's copies; each of the kStagingThreads threads
// arrives on the `staged` mbarrier after its stores (arrive releases them), and the consumers
// wait on it (acquire) after their main loop, before the epilogue reads the copies. Staged by
// every thread before the main loop instead, the copies' global-load latency ran in series with
// it at one block per SM: `dyngen plan` put that prologue at 39 us of Phi-3.5-MoE's gate/up GEMM
// at s = 4096 (13 waves), beside a 638 us main loop that now hides it. The producer's warps run
// the copies under its setmaxnreg budget (kProducerRegs), so the loops keep few registers.
template <class Tile>
DG_DEVICE dg_u64* dg_wgmma_staged_barrier() {
  return dg_wgmma_full_barriers<Tile>() + 2 * Tile::kStages;
}

template <class Tile>
DG_DEVICE bool dg_wgmma_is_stager() {
  return dg_wgmma_is_producer<Tile>() && threadIdx.x % 128 >= 32;
}

// The stager's index in [0, kStagingThreads).
template <class Tile>
DG_DEVICE int dg_wgmma_stager_index() {
  return static_cast<int>(threadIdx.x % 128) - 32;
}

template <class Tile>
DG_DEVICE void dg_wgmma_staged_arrive() {
  dg_mbarrier_arrive(dg_wgmma_staged_barrier<Tile>());
}

template <class Tile>
DG_DEVICE void dg_wgmma_staged_wait() {
  dg_mbarrier_wait_parity(dg_wgmma_staged_barrier<Tile>(), 0u, "staged");
}

// The k tiles over all segments.
template <class Tile, int NSEG>
DG_DEVICE int dg_wgmma_k_tiles(const long long (&seg_k)[NSEG]) {
  int k_tiles = 0;
  DG_UNROLL
  for (int g = 0; g < NSEG; ++g) k_tiles += Tile::k_tiles(seg_k[g]);
  return k_tiles;
}

// The producer warpgroup (Note [Warp-specialized main loop]): registers back to the pool, then one
// thread issues every k tile's boxes into its stage once the consumers have freed it, and waits
// for the frees of the last round, after which every stage is free and no copy is in flight.
// Segment g is seg_k[g] long; a_maps[g] and b_maps[g][j] are 2-D maps of its A (dims {K_g, M},
// box {64, BM}) and B_j (dims {K_g, N}, box {64, BN}; N-major: dims {N, K_g}, box {64, 64}),
// 128-byte swizzle.
template <class Tile, int NSEG>
DG_DEVICE void dg_wgmma_mainloop_producer(const DgTensorMap* const (&a_maps)[NSEG],
                                          const DgTensorMap* const (&b_maps)[NSEG][Tile::NB],
                                          const long long (&seg_k)[NSEG], long long m0,
                                          long long n0) {
  if constexpr (Tile::kRebalance) dg_setmaxnreg_dec<Tile::kProducerRegs>();
  if (threadIdx.x % 128 != 0) return;
  unsigned char* const smem = dg_dynamic_smem();
  dg_u64* const full = dg_wgmma_full_barriers<Tile>();
  dg_u64* const empty = full + Tile::kStages;
  int t = 0;  // the tile across segments: its stage and round
  for (int g = 0; g < NSEG; ++g) {
    for (int kt = 0; kt < Tile::k_tiles(seg_k[g]); ++kt, ++t) {
      const int s = t % Tile::kStages, k0 = kt * Tile::kBK;
      const unsigned round = static_cast<unsigned>(t / Tile::kStages);
      dg_mbarrier_wait_parity(&empty[s], (round & 1u) ^ 1u, "empty");
      dg_mbarrier_arrive_expect_tx(&full[s], Tile::kStage);
      unsigned char* const stage = smem + s * Tile::kStage;
      dg_tma_load_2d(stage, a_maps[g], k0, static_cast<int>(m0), &full[s]);
      DG_UNROLL
      for (int j = 0; j < Tile::NB; ++j) {
        unsigned char* const b_stage = stage + Tile::kStageA + j * Tile::kStageB;
        if constexpr (Tile::kBMnMajor) {
          DG_UNROLL
          for (int h = 0; h < Tile::BN / 64; ++h)
            dg_tma_load_2d(b_stage + h * Tile::kBoxBytesMn, b_maps[g][j],
                           static_cast<int>(n0) + 64 * h, k0, &full[s]);
        } else {
          dg_tma_load_2d(b_stage, b_maps[g][j], k0, static_cast<int>(n0), &full[s]);
        }
      }
    }
  }
  // Each stage's wait before the tile a round after its last: the consumers have freed them all.
  for (int i = 0; i < Tile::kStages; ++i, ++t) {
    const unsigned round = static_cast<unsigned>(t / Tile::kStages);
    dg_mbarrier_wait_parity(&empty[t % Tile::kStages], (round & 1u) ^ 1u, "empty");
  }
}

// A consumer warpgroup: registers from the pool, then the block's BM x BN tiles over k_tiles k
// tiles accumulated into acc (zeroed here), acc[j] for B operand j (Note [wgmma layouts]:
// warpgroup w holds rows 64 w + [0, 64)).
template <class Tile>
DG_DEVICE void dg_wgmma_mainloop_consumer(float (&acc)[Tile::NB][Tile::BN / 2], int k_tiles) {
  if constexpr (Tile::kRebalance) dg_setmaxnreg_inc<Tile::kConsumerRegs>();
  unsigned char* const smem = dg_dynamic_smem();
  dg_u64* const full = dg_wgmma_full_barriers<Tile>();
  dg_u64* const empty = full + Tile::kStages;
  const int wg = static_cast<int>(threadIdx.x / 128);
  DG_UNROLL
  for (int j = 0; j < Tile::NB; ++j) DG_UNROLL
  for (int i = 0; i < Tile::BN / 2; ++i) acc[j][i] = 0.0f;
  // Each warp frees the stage of tile t - 1 once its part of that tile's wgmmas has retired.
  auto free_previous = [&](int t) {
    if (threadIdx.x % 32 == 0 && t > 0) dg_mbarrier_arrive(&empty[(t - 1) % Tile::kStages]);
  };
  // Note [Stacked B operands]: instruction j's accumulators.
  float(&mma_acc)[Tile::kMmas][Tile::kMmaN / 2] =
      reinterpret_cast<float(&)[Tile::kMmas][Tile::kMmaN / 2]>(acc);
  for (int t = 0; t < k_tiles; ++t) {
    const int s = t % Tile::kStages;
    dg_mbarrier_wait_parity(&full[s], static_cast<unsigned>(t / Tile::kStages) & 1u, "full");
    unsigned char* const stage = smem + s * Tile::kStage;
    const dg_u64 da =
        dg_wgmma_desc(dg_smem_address(stage + wg * 64 * 128), 16, 1024, kDgSwizzle128B);
    dg_wgmma_fence();
    DG_UNROLL
    for (int j = 0; j < Tile::kMmas; ++j) {
      const dg_u64 db =
          dg_wgmma_desc(dg_smem_address(stage + Tile::kStageA + j * Tile::kMmaN * 128), Tile::kBLbo,
                        1024, kDgSwizzle128B);
      DG_UNROLL
      for (int kk = 0; kk < Tile::kBK / 16; ++kk)
        dg_wgmma_m64nNk16_bf16<Tile::kMmaN, false, Tile::kBMnMajor>(mma_acc[j], da + 2 * kk,
                                                                    db + Tile::kBStep * kk, true);
    }
    dg_wgmma_commit();
    dg_wgmma_wait<1>();  // this warp's part of the previous tile has retired
    free_previous(t);
  }
  dg_wgmma_wait<0>();
  free_previous(k_tiles);  // the last tile's stage too, for the producer's final waits
}

// Calls epi(row, col, value[, value1], half) for the consumer's accumulators inside
// [0, M) x [0, N), a row's two neighbouring columns (d[i] and d[i + 1], i even) one after the
// other, `half` the stores for that element (Note [Paired stores] in dg_store.cuh).
template <class Tile, class Epi, class Stores>
DG_DEVICE void dg_wgmma_epilogue(const float (&acc)[Tile::NB][Tile::BN / 2], long long m0,
                                 long long M, long long n0, long long N, const Epi& epi,
                                 Stores& stores) {
  const int T = static_cast<int>(threadIdx.x % 128);
  const long long rows = m0 + 64 * static_cast<long long>(threadIdx.x / 128);
  // kChunk pairs' operands loaded first (Note [Epilogue operand loads] in dg_epilogue_loads.cuh).
  constexpr int kChunk = 2 * DgEpilogueLoadTiles<Stores, Tile::BN / 8>::value;
  DG_UNROLL
  for (int i0 = 0; i0 < Tile::BN / 2; i0 += 2 * kChunk) {
    DgEpilogueLoads<Stores, kChunk> loads(stores);
    DG_UNROLL
    for (int i = i0; i < i0 + 2 * kChunk; i += 2)
      loads.load_clamped((i - i0) / 2, rows + dg_wgmma_acc_row(T, i), n0 + dg_wgmma_acc_col(T, i),
                         M, N);
    DG_UNROLL
    for (int i = i0; i < i0 + 2 * kChunk; i += 2) {
      const long long r = rows + dg_wgmma_acc_row(T, i), c = n0 + dg_wgmma_acc_col(T, i);
      if (r >= M) continue;
      dg_store_columns(stores, c, N, [&](const auto& half, int h) {
        const auto& io = loads.element(half, (i - i0) / 2, h);
        if constexpr (Tile::NB == 1)
          epi(r, c + h, acc[0][i + h], io);
        else
          epi(r, c + h, acc[0][i + h], acc[1][i + h], io);
      });
    }
  }
}

// As above with every element stored at once by epi(row, col, value[, value1]) itself.
template <class Tile, class Epi>
DG_DEVICE void dg_wgmma_epilogue(const float (&acc)[Tile::NB][Tile::BN / 2], long long m0,
                                 long long M, long long n0, long long N, const Epi& epi) {
  DgDirectStores direct;
  if constexpr (Tile::NB == 1)
    dg_wgmma_epilogue<Tile>(
        acc, m0, M, n0, N,
        [&](long long row, long long col, float v, const DgDirectStores&) { epi(row, col, v); },
        direct);
  else
    dg_wgmma_epilogue<Tile>(
        acc, m0, M, n0, N,
        [&](long long row, long long col, float v0, float v1, const DgDirectStores&) {
          epi(row, col, v0, v1);
        },
        direct);
}

// Note [Rank-r products on tensor cores]
// The rank-r products of a wgmma GEMM's epilogue (Note [Staged rank-r epilogue] in
// dg_epilogue.cuh: product q at (row, col) is sum_j U_q[row][j] W_q[col][j], U and W in f32) run
// as wgmmas on a bf16 split: v = hi + lo with hi = bf16(v) and lo = bf16(v - hi), and
//   U W^T ~ U_hi W_hi^T + U_lo W_hi^T + U_hi W_lo^T,
// the dropped U_lo W_lo^T and the residues below lo being about 2^-16 of each term: about
// 2^-15 relative to the product, which the epilogue adds to an f32 accumulator and rounds to
// bf16 (2^-9) on the way out. (This is the "bf16x3" way to f32-class products on bf16 tensor
// cores.) As SIMT FMAs the products were the epilogue's largest part: in Phi-3.5-MoE's gate/up
// GEMM at s = 4096, 4 loops of 16 iterations of 59 instructions per warp (32 FFMA, 20 LDS) beside
// the epilogue's 2921 other instructions; here they are 3 KS wgmmas per product and chunk.
// Layout (DgWgmmaRank): the stagers (Note [Rank-r staging beside the main loop]) write each
// product's U rows and W columns as k16 steps, product q's hi parts at steps 2 KS q + s and lo
// parts at 2 KS q + KS + s (s < KS = ceil(r / 16); j >= r is zero), four steps to a 64-wide k tile
// of 128-byte rows, 128-byte swizzled as the main loop's stages are (Note [wgmma layouts]): A
// (U) tiles of BM rows, then B (W) tiles of BN rows, from a 1024-byte boundary after the main
// loop's shared memory. For the seed's and Phi's two rank-16 products that is one k tile: 32 KB
// for a 128 x 128 tile, about the 33.9 KB the f32 copies took. A chunk of 8 kChunk columns runs
// product q as m64n(8 kChunk)k16 wgmmas (A steps hi, lo, hi against B steps hi, hi, lo) into
// registers laid out as the accumulators' columns there, then the epilogue calls epi on them.
// Element (row, kk) of k16 step `step` in k tiles of `rows` rows of 128 bytes, 128-byte
// swizzled (tiles on a 1024-byte boundary, so the XOR takes the row's bits 0-2).
DG_DEVICE void dg_wgmma_rank_put(unsigned char* tiles, int rows, int row, int step, int kk,
                                 dg_bf16 x) {
  const int col = (step % 4) * 16 + kk, chunk = (col / 8) ^ (row % 8);
  *reinterpret_cast<dg_bf16*>(tiles + (step / 4) * rows * 128 + row * 128 + chunk * 16 +
                              (col % 8) * 2) = x;
}

// v's bf16 hi and lo parts as element j of product q's row `row` (an A or B operand region of
// `rows` rows; Note [Rank-r products on tensor cores]).
template <int KS>
DG_DEVICE void dg_wgmma_rank_split(unsigned char* tiles, int rows, int row, int q, int j, float v) {
  const dg_bf16 hi = dg_float_to_bf16(v);
  const dg_bf16 lo = dg_float_to_bf16(v - dg_bf16_to_float(hi));
  dg_wgmma_rank_put(tiles, rows, row, 2 * KS * q + j / 16, j % 16, hi);
  dg_wgmma_rank_put(tiles, rows, row, 2 * KS * q + KS + j / 16, j % 16, lo);
}

// The epilogue with rank-r products (Note [Rank-r products on tensor cores]) over `rank`, the
// staged operands (DgWgmmaRank's layout, published by the `staged` barrier). Calls epi(row, col,
// value[, value1], rank, half) with rank[q] product q's value there, as dg_wgmma_epilogue does.
template <class Tile, int NP, int KS, class Epi, class Stores>
DG_DEVICE void dg_wgmma_epilogue_rank(const float (&acc)[Tile::NB][Tile::BN / 2], long long m0,
                                      long long M, long long n0, long long N,
                                      const unsigned char* rank, const Epi& epi, Stores& stores) {
  typedef DgWgmmaRank<Tile, NP, KS> Rank;
  constexpr int kTiles = Tile::BN / 8, kChunk = kTiles < 4 ? kTiles : 4;
  const int T = static_cast<int>(threadIdx.x % 128), wg = static_cast<int>(threadIdx.x / 128);
  const int r0 = 64 * wg + dg_wgmma_acc_row(T, 0);
  const int c0 = dg_wgmma_acc_col(T, 0);
  const dg_u32 a_base = dg_smem_address(rank) + wg * 64 * 128;
  const dg_u32 b_base = dg_smem_address(rank) + Rank::kBOffset;
  // Step `step`'s descriptor: k tile step / 4 of `tile_bytes`, 32 bytes a step into its rows.
  auto desc = [](dg_u32 base, int tile_bytes, int step) {
    return dg_wgmma_desc(base + (step / 4) * tile_bytes, 16, 1024, kDgSwizzle128B) + 2 * (step % 4);
  };
  DG_UNROLL
  for (int chunk = 0; chunk < kTiles; chunk += kChunk) {
    // The chunk's operands, loaded under the products' wgmmas (Note [Epilogue operand loads] in
    // dg_epilogue_loads.cuh): pair 2 nt + i / 2.
    DgEpilogueLoads<Stores, 2 * kChunk> loads(stores);
    DG_UNROLL
    for (int nt = 0; nt < kChunk; ++nt) DG_UNROLL
    for (int i = 0; i < 4; i += 2)
      loads.load_clamped(2 * nt + i / 2, m0 + r0 + 8 * (i / 2), n0 + 8 * (chunk + nt) + c0, M, N);
    // p[q][4 nt + i + h]: row r0 + 8 (i / 2), column 8 (chunk + nt) + c0 + h, as in acc.
    float p[NP][4 * kChunk];
    dg_wgmma_fence();
    const dg_u32 b_chunk = b_base + chunk * 8 * 128;
    DG_UNROLL
    for (int q = 0; q < NP; ++q) {
      DG_UNROLL
      for (int s = 0; s < KS; ++s) {
        const int hi = 2 * KS * q + s, lo = hi + KS;
        dg_wgmma_m64nNk16_bf16<8 * kChunk>(p[q], desc(a_base, Tile::BM * 128, hi),
                                           desc(b_chunk, Tile::BN * 128, hi), s > 0);
        dg_wgmma_m64nNk16_bf16<8 * kChunk>(p[q], desc(a_base, Tile::BM * 128, lo),
                                           desc(b_chunk, Tile::BN * 128, hi), true);
        dg_wgmma_m64nNk16_bf16<8 * kChunk>(p[q], desc(a_base, Tile::BM * 128, hi),
                                           desc(b_chunk, Tile::BN * 128, lo), true);
      }
    }
    dg_wgmma_commit();
    dg_wgmma_wait<0>();
    DG_UNROLL
    for (int nt = 0; nt < kChunk; ++nt) {
      DG_UNROLL
      for (int i = 0; i < 4; i += 2) {
        // acc index 4 n + i holds row r0 + 8 (i / 2), column 8 n + c0 + i % 2.
        const int n = chunk + nt;
        const long long row = m0 + r0 + 8 * (i / 2), col = n0 + 8 * n + c0;
        if (row >= M) continue;
        dg_store_columns(stores, col, N, [&](const auto& half, int h) {
          float values[NP];
          DG_UNROLL
          for (int q = 0; q < NP; ++q) values[q] = p[q][4 * nt + i + h];
          const int c = static_cast<int>(col) + h;
          const auto& io = loads.element(half, 2 * nt + i / 2, h);
          if constexpr (Tile::NB == 1)
            epi(row, c, acc[0][4 * n + i + h], values, io);
          else
            epi(row, c, acc[0][4 * n + i + h], acc[1][4 * n + i + h], values, io);
        });
      }
    }
  }
}

#endif  // wgmma available
