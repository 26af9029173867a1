// Device side of `topk` (Note [Top-k op] in ir/shape_infer.cc; emitted by codegen/emit_topk.cc):
// one thread finds the K best positions of one row, keeping them in registers.
#pragma once
#include "dg_ops.cuh"

// Whether the element (a at position ia) ranks before (b at ib): NaN above every number, then the
// larger value, then the lower position (equal values, -0 and +0 included, and NaN against NaN).
template <class C>
DG_DEVICE bool dg_topk_before(C a, long long ia, C b, long long ib) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return a_nan && (!b_nan || ia < ib);
  return a > b || (a == b && ia < ib);
}

// Writes the positions of the K best of row[0, len) to out[0, K), best first (K <= len).
// The row is read once, by position. The kept positions are sorted; an element enters only when
// it ranks before the K-th, and then sinks to its place through K compare-and-swap steps, so the
// order is a stable descending sort's. K is a constant and every array index is static after
// unrolling: the arrays live in registers.
template <int K, class T>
DG_DEVICE void dg_topk_row(const T* __restrict__ row, long long len, long long* __restrict__ out) {
  using C = decltype(dg_widen(row[0]));
  C v[K];
  long long at[K];  // -1: an empty slot (only before the first K elements are read)
#pragma unroll
  for (int s = 0; s < K; ++s) {
    v[s] = C(0);
    at[s] = -1;
  }
  for (long long j = 0; j < len; ++j) {
    C x = dg_widen(row[j]);
    if (at[K - 1] >= 0 && !dg_topk_before(x, j, v[K - 1], at[K - 1])) continue;
    long long xj = j;
#pragma unroll
    for (int s = 0; s < K; ++s) {
      if (at[s] < 0 || (xj >= 0 && dg_topk_before(x, xj, v[s], at[s]))) {
        const C tv = v[s];
        const long long ta = at[s];
        v[s] = x;
        at[s] = xj;
        x = tv;
        xj = ta;
      }
    }
  }
#pragma unroll
  for (int s = 0; s < K; ++s) out[s] = at[s];
}
