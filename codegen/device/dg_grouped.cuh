// Device side of the grouped-experts kernels (Note [Grouped experts ops] in
// ir/shape_infer_grouped.cc; emitted by codegen/emit_moe_route.cc and codegen/emit_grouped_mm.cc):
// the routing's counting sort, the grouped GEMMs' tile schedule over the device-side offsets, the
// scalar grouped tile and the per-expert weight-gradient tile.
//
// Note [Grouped tile schedule]
// A grouped GEMM never reads the offsets on the host. Its grid is the worst case, ceil(R / BM) +
// E + 1 row tiles: expert e owns ceil(rows_e / BM) tiles, in expert order, and the rows past
// offs[E-1] (zeros in the result) are one more segment; the sum over E + 1 segments of
// ceil(rows / BM) is at most R / BM + E + 1. Each block walks the offsets (E loads, the same for
// every thread of the block: one broadcast each), finds its segment and row range, and a surplus
// block returns at once. The walk also checks every offset (non-decreasing, within [0, R]), so
// offsets that no routing gives are an error (Note [Bad expert indices]), and the row range is
// always inside [0, R): nothing is read or written out of bounds whatever the offsets hold.
#pragma once
#include "dg_config.cuh"
#include "dg_types.cuh"

#if defined(DG_HAS_DEVICE)

// Reports bad routing input and ends the launch: printf then __trap() on a GPU (the error shows at
// the next synchronization, like PyTorch's device-side asserts), the launch's error under the
// host emulation.
#if defined(DG_ON_GPU)
#define DG_GROUPED_TRAP(format, ...) \
  do {                               \
    printf(format, __VA_ARGS__);     \
    __trap();                        \
  } while (0)
#else
#define DG_GROUPED_TRAP(format, ...) ::dg::emu::debug_trap(format, __VA_ARGS__)
#endif

#define DG_BAD_EXPERT_MESSAGE \
  "dyngen: expert index %lld at position %lld is out of range for %d experts\n"
#define DG_BAD_OFFSETS_MESSAGE                                                           \
  "dyngen: grouped GEMM offsets: offs[%d] = %lld is not a non-decreasing offset within " \
  "[0, %lld]\n"

// The expert of entry p of a routing (any integer type), or -1 when it is outside [0, E).
template <class I>
DG_DEVICE int dg_route_expert(const I* idx, long long p, int E) {
  const long long e = static_cast<long long>(idx[p]);
  return e >= 0 && e < E ? static_cast<int>(e) : -1;
}

// Routing pass 1 (one block per chunk of `chunk_len` entries): the chunk's count per expert, into
// hist[chunk * E + e]. Integer shared-memory atomics: the counts do not depend on their order. A
// bad index ends the launch (Note [Bad expert indices] in codegen/emit_moe_route.cc).
template <class I, int E>
DG_DEVICE void dg_route_count(const I* idx, long long n, long long chunk_len, int* hist) {
  __shared__ int counts[E];
  for (int e = threadIdx.x; e < E; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  const long long begin = static_cast<long long>(blockIdx.x) * chunk_len;
  const long long end = begin + chunk_len < n ? begin + chunk_len : n;
  for (long long p = begin + threadIdx.x; p < end; p += blockDim.x) {
    const int e = dg_route_expert(idx, p, E);
    if (e < 0)
      DG_GROUPED_TRAP(DG_BAD_EXPERT_MESSAGE, static_cast<long long>(idx[p]), p, E);
    else
      atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    hist[static_cast<long long>(blockIdx.x) * E + e] = counts[e];
}

// Routing pass 2 (one block): per expert, each chunk's count becomes the number of the expert's
// entries in earlier chunks (chunk order); offs[e] = the entries of experts <= e.
template <int E>
DG_DEVICE void dg_route_scan(int* hist, long long chunks, int* offs) {
  __shared__ int totals[E];
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int running = 0;
    for (long long c = 0; c < chunks; ++c) {
      const int v = hist[c * E + e];
      hist[c * E + e] = running;
      running += v;
    }
    totals[e] = running;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int running = 0;
    for (int e = 0; e < E; ++e) {
      running += totals[e];
      offs[e] = running;
    }
  }
}

// Routing pass 3 (one warp per chunk): the stable order. Entry p of expert e goes to offs[e - 1]
// + (entries of e in earlier chunks) + (entries of e earlier in this chunk): 32 entries at a time,
// each lane's rank among the lanes before it with the same expert found by shuffles, then the
// last of them moves the expert's next position on. A bad index (pass 1 reported it) is skipped.
template <class I, int E>
DG_DEVICE void dg_route_scatter(const I* idx, long long n, long long chunk_len, const int* hist,
                                const int* offs, int* order) {
  __shared__ int next[E];
  const long long chunk = blockIdx.x;
  const int lane = static_cast<int>(threadIdx.x);
  for (int e = lane; e < E; e += 32) next[e] = (e > 0 ? offs[e - 1] : 0) + hist[chunk * E + e];
  __syncwarp();
  const long long begin = chunk * chunk_len;
  const long long end = begin + chunk_len < n ? begin + chunk_len : n;
  for (long long p0 = begin; p0 < end; p0 += 32) {
    const long long p = p0 + lane;
    const int e = p < end ? dg_route_expert(idx, p, E) : -1;
    int rank = 0, peers = 0;
    for (int j = 0; j < 32; ++j) {
      const int ej = __shfl_sync(0xffffffffu, e, j);
      peers += ej == e;
      rank += ej == e && j < lane;
    }
    const int base = e >= 0 ? next[e] : 0;
    __syncwarp();
    if (e >= 0) {
      const long long pos = static_cast<long long>(base) + rank;
      if (pos < n) order[pos] = static_cast<int>(p);
      if (rank == peers - 1) next[e] = base + peers;
    }
    __syncwarp();
  }
}

// Note [Grouped tile schedule]: row tile `tile` of a grouped GEMM over R rows in BM-row tiles.
// Returns its segment (an expert, or E for the rows past offs[E-1]) with the tile's rows [m0,
// m_end), or -1 for a surplus tile; bad offsets end the launch.
template <int E>
DG_DEVICE int dg_grouped_tile(const int* offs, long long R, long long tile, int BM, long long* m0,
                              long long* m_end) {
  long long prev = 0, first = 0;
  int found = -1;
  for (int e = 0; e <= E; ++e) {
    const long long end = e < E ? static_cast<long long>(offs[e]) : R;
    if (end < prev || end > R) DG_GROUPED_TRAP(DG_BAD_OFFSETS_MESSAGE, e, end, R);
    const long long tiles = (end - prev + BM - 1) / BM;
    if (found < 0 && tile < first + tiles) {
      found = e;
      *m0 = prev + (tile - first) * BM;
      *m_end = end;
    }
    first += tiles;
    prev = end;
  }
  return found;
}

// Checks every offset (as dg_grouped_tile does) and returns expert e's rows [begin, end).
template <int E>
DG_DEVICE void dg_grouped_segment(const int* offs, long long R, int e, long long* begin,
                                  long long* end) {
  long long prev = 0;
  for (int i = 0; i < E; ++i) {
    const long long o = static_cast<long long>(offs[i]);
    if (o < prev || o > R) DG_GROUPED_TRAP(DG_BAD_OFFSETS_MESSAGE, i, o, R);
    if (i == e) {
      *begin = prev;
      *end = o;
    }
    prev = o;
  }
}

// Zeros of the rows [m0, m_end) x columns [n0, n0 + BN) inside N (the rows past offs[E-1]).
template <class T, int kThreads, int BM, int BN>
DG_DEVICE void dg_grouped_zero_tile(T* out, long long m0, long long m_end, long long n0,
                                    long long N) {
  for (int i = threadIdx.x; i < BM * BN; i += kThreads) {
    const long long r = m0 + i / BN, c = n0 + i % BN;
    if (r < m_end && c < N) out[r * N + c] = dg_convert<T>(0.0f);
  }
}

// The scalar grouped tile (256 threads, a 64 x 64 tile, 4 x 4 per thread, K in steps of 16 through
// shared memory, f32 accumulation in K order, one rounding): rows [m0, m_end) of a[., K] times
// the expert's weight w, [N][K] (BKN false) or [K][N].
template <class T, bool BKN>
DG_DEVICE void dg_grouped_scalar_tile(T* out, const T* a, const T* w, long long m0, long long m_end,
                                      long long n0, long long N, long long K) {
  __shared__ float As[16][64 + 1];
  __shared__ float Bs[16][64 + 1];
  const int tx = static_cast<int>(threadIdx.x % 16), ty = static_cast<int>(threadIdx.x / 16);
  float acc[4][4];
  DG_UNROLL
  for (int i = 0; i < 4; ++i) DG_UNROLL
  for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (long long k0 = 0; k0 < K; k0 += 16) {
    for (int i = threadIdx.x; i < 64 * 16; i += 256) {
      const int kk = i % 16, o = i / 16;
      const long long k = k0 + kk, r = m0 + o, n = n0 + o;
      As[kk][o] = r < m_end && k < K ? dg_convert<float>(a[r * K + k]) : 0.0f;
      Bs[kk][o] = n < N && k < K ? dg_convert<float>(BKN ? w[k * N + n] : w[n * K + k]) : 0.0f;
    }
    __syncthreads();
    DG_NO_UNROLL
    for (int kk = 0; kk < 16; ++kk) {
      DG_UNROLL
      for (int i = 0; i < 4; ++i) DG_UNROLL
      for (int j = 0; j < 4; ++j) acc[i][j] += As[kk][ty * 4 + i] * Bs[kk][tx * 4 + j];
    }
    __syncthreads();
  }
  DG_UNROLL
  for (int i = 0; i < 4; ++i) DG_UNROLL
  for (int j = 0; j < 4; ++j) {
    const long long r = m0 + ty * 4 + i, c = n0 + tx * 4 + j;
    if (r < m_end && c < N) out[r * N + c] = dg_convert<T>(acc[i][j]);
  }
}

// The weight gradient of expert e (blockIdx.x) for the 64 x 64 tile (blockIdx.y, blockIdx.z) of
// [N, K]: out[e][n][k] = sum over the segment's rows r, in row order, of g[r][n] * x[r][k]
// (f32, one rounding; an empty segment gives zeros). 256 threads, 4 x 4 each, rows in steps of 16.
template <class T, int E>
DG_DEVICE void dg_grouped_wgrad_tile(T* out, const T* g, const T* x, const int* offs, long long R,
                                     long long N, long long K) {
  const int e = static_cast<int>(blockIdx.x);
  const long long n0 = static_cast<long long>(blockIdx.y) * 64;
  const long long k0 = static_cast<long long>(blockIdx.z) * 64;
  long long begin = 0, end = 0;
  dg_grouped_segment<E>(offs, R, e, &begin, &end);
  __shared__ float Gs[16][64 + 1];
  __shared__ float Xs[16][64 + 1];
  const int tx = static_cast<int>(threadIdx.x % 16), ty = static_cast<int>(threadIdx.x / 16);
  float acc[4][4];
  DG_UNROLL
  for (int i = 0; i < 4; ++i) DG_UNROLL
  for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (long long r0 = begin; r0 < end; r0 += 16) {
    for (int i = threadIdx.x; i < 64 * 16; i += 256) {
      const int rr = i / 64, o = i % 64;  // consecutive threads along a row: coalesced
      const long long r = r0 + rr, n = n0 + o, k = k0 + o;
      Gs[rr][o] = r < end && n < N ? dg_convert<float>(g[r * N + n]) : 0.0f;
      Xs[rr][o] = r < end && k < K ? dg_convert<float>(x[r * K + k]) : 0.0f;
    }
    __syncthreads();
    DG_NO_UNROLL
    for (int rr = 0; rr < 16; ++rr) {
      DG_UNROLL
      for (int i = 0; i < 4; ++i) DG_UNROLL
      for (int j = 0; j < 4; ++j) acc[i][j] += Gs[rr][ty * 4 + i] * Xs[rr][tx * 4 + j];
    }
    __syncthreads();
  }
  DG_UNROLL
  for (int i = 0; i < 4; ++i) DG_UNROLL
  for (int j = 0; j < 4; ++j) {
    const long long n = n0 + ty * 4 + i, k = k0 + tx * 4 + j;
    if (n < N && k < K) out[(static_cast<long long>(e) * N + n) * K + k] = dg_convert<T>(acc[i][j]);
  }
}

#endif  // DG_HAS_DEVICE
