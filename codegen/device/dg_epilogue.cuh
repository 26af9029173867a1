// Rank-r products inside GEMM epilogues: out(row, col) = sum over j < K of t(row, j) * w(col, j),
// the LoRA update U @ B^T whose U = x @ A^T a split-K kernel computed (Note [Rank-r products] in
// codegen/emit_rank_gemm.cc). The generated epilogue calls dg_rank_product with two accessors,
// read from global memory or from copies staged in shared memory.
//
// Note [Staged rank-r epilogue]
// Read from global memory, every output element walks U's row and B's column again: K steps of
// two dependent loads and an FMA, a serial loop whose load latency nothing hides (a review of
// the SASS found it took as long as the main loop). A tensor-core GEMM kernel instead copies, once
// per block after its main loop, the block's BM rows of U ([BM][K + 1] floats) and BN columns of B
// ([K][BN + 1] floats) into the main loop's shared memory, which is free by then (dg_gemm_smem),
// and computes the products for its own accumulator elements in registers (dg_gemm_epilogue_rank):
// per 16-row tile, each j step loads 2 values of U and 2 per n8 tile of B and does 4 FMAs per n8
// tile, instead of 2 loads per FMA. The padding keeps a warp's reads free of bank conflicts (its
// lanes read 8 rows of U, stride K + 1 words, and neighbouring columns of B) and the staging writes
// too. The values and the order of the additions (j ascending) are the global path's. The code
// generator stages when every product is f32 with the same K and the copies fit the main loop's
// shared memory (codegen/emit_gemm.cc); otherwise the epilogue reads global memory. The sm_90a
// wgmma kernels stage bf16 splits instead, beside the main loop, and run the products on tensor
// cores (Note [Rank-r products on tensor cores] in dg_gemm_sm90.cuh).
#pragma once
#include "dg_config.cuh"
#include "dg_ops.cuh"

// t(row, j) = T[row * K + j] (U, row-major, contiguous rows).
template <class CT, int K, class E>
struct DgRankRowsGlobal {
  static constexpr bool kStaged = false;
  const E* p;
  DG_DEVICE CT operator()(long long row, int j) const { return dg_convert<CT>(p[row * K + j]); }
};

// w(col, j) = W[col * K + j] (a linear's weight, [N][K]) or W[j * ld + col] (a matmul's [K][N]).
template <class CT, int K, bool LINEAR, class E>
struct DgRankColsGlobal {
  static constexpr bool kStaged = false;
  const E* p;
  long long ld;
  DG_DEVICE CT operator()(int col, int j) const {
    return dg_convert<CT>(LINEAR ? p[static_cast<long long>(col) * K + j] : p[j * ld + col]);
  }
};

template <class CT, int K, class E>
DG_DEVICE DgRankRowsGlobal<CT, K, E> dg_rank_rows(const E* p) {
  return {p};
}
template <class CT, int K, bool LINEAR, class E>
DG_DEVICE DgRankColsGlobal<CT, K, LINEAR, E> dg_rank_cols(const E* p, long long ld) {
  return {p, ld};
}

// sum_j t(row, j) * w(col, j), j ascending from 0 (the order PyTorch's f32 reference is checked
// against). The loop stays rolled: unrolled, its global loads would compete with the
// accumulators for registers and spill.
template <class CT, int K, class T, class W>
DG_DEVICE CT dg_rank_product(const T& t, long long row, const W& w, int col) {
  CT s = 0;
  DG_NO_UNROLL
  for (int j = 0; j < K; ++j) s += t(row, j) * w(col, j);
  return s;
}
