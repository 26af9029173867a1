// The sm_80 tensor-core GEMM's epilogue (Note [Tensor-core GEMM] in dg_gemm_sm80.cuh): where a
// thread's mma.sync accumulators lie in the block tile, and the loops that hand each element
// inside [0, M) x [0, N) to the generated epilogue, rank-r products staged in shared memory or
// not (Note [Staged rank-r epilogue] in dg_epilogue.cuh).
#pragma once
#include "dg_config.cuh"
#include "dg_epilogue_loads.cuh"
#include "dg_gemm_tile_sm80.cuh"
#include "dg_store.cuh"
#include "dg_types.cuh"

// Where the thread's accumulator elements lie in the block tile (Note [mma fragment layouts] in
// dg_mma_sm80.cuh): element i of n8 tile nt of 16-row tile mt is at (row(mt, i), col(nt, i)).
template <class Tile>
struct DgGemmLane {
  int wm, wn, g, t;  // the warp's tile origin; the lane's group and thread in group
  DG_DEVICE DgGemmLane() {
    const unsigned lane = threadIdx.x % 32;                     // one-dimensional blocks
    const unsigned warp = threadIdx.x / 32 % Tile::kWarpTiles;  // its tile in every K slice
    wm = static_cast<int>(warp / Tile::kWarpsN) * Tile::WM;
    wn = static_cast<int>(warp % Tile::kWarpsN) * Tile::WN;
    g = static_cast<int>(lane / 4);
    t = static_cast<int>(lane % 4);
  }
  DG_DEVICE int row(int mt, int i) const { return wm + 16 * mt + g + 8 * (i / 2); }
  DG_DEVICE int col(int nt, int i) const { return wn + 8 * nt + 2 * t + (i % 2); }

  // f(row, col, nt, i, half) for the elements of 16-row tile mt inside [0, M) x [0, N), a row's
  // two neighbouring columns one after the other, `half` the stores for that element (Note
  // [Paired stores] in dg_store.cuh), the operands of kChunk n8 tiles loaded first (Note [Epilogue
  // operand loads] in dg_epilogue_loads.cuh: pair 2 (nt - nt0) + i / 2).
  template <class Stores, class F>
  DG_DEVICE void for_elements(int mt, long long m0, long long M, long long n0, long long N,
                              Stores& stores, const F& f) const {
    constexpr int kChunk = DgEpilogueLoadTiles<Stores, Tile::NT>::value;
    DG_UNROLL
    for (int nt0 = 0; nt0 < Tile::NT; nt0 += kChunk)
      for_elements_of<kChunk>(mt, nt0, m0, M, n0, N, stores, f);
  }
  // for_elements over n8 tiles [nt0, nt0 + kChunk): their operands' loads, then the elements.
  template <int kChunk, class Stores, class F>
  DG_DEVICE void for_elements_of(int mt, int nt0, long long m0, long long M, long long n0,
                                 long long N, Stores& stores, const F& f) const {
    DgEpilogueLoads<Stores, 2 * kChunk> loads(stores);
    DG_UNROLL
    for (int nt = nt0; nt < nt0 + kChunk; ++nt) DG_UNROLL
    for (int i = 0; i < 4; i += 2)
      loads.load(2 * (nt - nt0) + i / 2, m0 + row(mt, i), n0 + col(nt, i), M, N);
    DG_UNROLL
    for (int nt = nt0; nt < nt0 + kChunk; ++nt) {
      if constexpr (Stores::kPaired) {
        DG_UNROLL
        for (int i = 0; i < 4; i += 2) {
          const long long r = m0 + row(mt, i), c = n0 + col(nt, i);
          if (r < M)
            dg_store_columns(stores, c, N, [&](const auto& half, int h) {
              f(r, static_cast<int>(c) + h, nt, i + h,
                loads.element(half, 2 * (nt - nt0) + i / 2, h));
            });
        }
      } else {
        // Element by element, each with its own bounds check (N may be odd). Not through
        // dg_store_columns's element branch: with it, ptxas gave the seed forward's sm_80 GEMMs
        // up to 170 registers instead of 150.
        DG_UNROLL
        for (int i = 0; i < 4; ++i) {
          const long long r = m0 + row(mt, i), c = n0 + col(nt, i);
          if (r < M && c < N)
            f(r, static_cast<int>(c), nt, i, loads.element(stores, 2 * (nt - nt0) + i / 2, i % 2));
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
