// Note [Tile choice]
// A tensor-core GEMM's M is the token count: one compile serves every M, so the tile cannot be
// fixed by a binding. The table, in one place (BN is 64 for two B operands, 32 columns per warp
// and operand, or for N <= 64; else 128, 64 columns per warp):
// - 32 x BN, 3 stages, when M's range ends at or below 32: a 64-row tile would be half empty.
// - 128 x BN, 4 warps in M, 2 stages, when M's range starts at 1024: fewer reloads of A and B
//   per MMA; 2 stages keep it in 48 KB of static shared memory.
// - 64 x BN, 2 warps in M, 3 stages: the default.
// - The small-M tile, 32 x 64, for the M where the default launches fewer than 2 x kFillCtas
//   blocks: parallelism before reuse. For one B operand one warp tile of 32 x 64 with BK = 64 in 2
//   stages (64 HMMA per k-tile; 28 KB, 8 blocks per SM); for two, two warp tiles of 32 x 32 per
//   operand, BK = 32, 3 stages. Each warp tile is shared by 4 (one B) or 2 (two) warps over K
//   (Note [Sliced K] in codegen/device/dg_gemm_tile_sm80.cuh): 4 warps a block, one per scheduler.
// A warp's copies and fragment loads per HMMA grow as its tile shrinks: with one B operand, 32 x 32
// warps took 3.7 instructions per HMMA in the backward's loop on sm_80, one 32 x 64 warp at BK = 32
// 3.0, at BK = 64 2.3 (tests/static/main_loop_test.cc holds every variant to 2.5 on sm_80).
//
// kFillCtas is the SM count of the H100 and H200 (132, ../shared/KERNELS.md: "132 SMs x 1.83
// GHz"), which also fills the A100's 108. Below one wave SMs idle for the whole kernel; between one
// and two, a wave's tail runs on a few SMs (144 blocks take as long as 264: the seed forward's
// gate/up GEMM at M = 513 is 16.0 us with the default tile in the H200 model, 10.3 us at M = 512).
// Two waves, not one, is where `dyngen plan` puts the switch: the seed forward at M = 513, 640,
// 768 takes 39.9, 40.3, 41.8 us in the model against 45.0, 46.9, 47.4 when switching at one wave,
// the backward 60.6-71.2 against 65.3-75.1, and at no size from 64 to 4096 (12 sizes, seed and
// Phi-3.5-MoE, forward and backward) is the two-wave switch slower.
// At M = 512 the seed's 64 x 128 and 64 x 64 tiles launch 64-128 blocks, the small tile 256-512.
//
// The variants are kernels of the same module, each launched with gridDim.z = variant_selector,
// which is 0 (not launched) outside its range: the runtime's shape program picks one per call
// from the launch sizes alone, with no branch of its own, and the plan costs only the launched
// one. Split-K for the smallest M is not a variant yet: the rank-r products already run split
// over K (emit_rank_gemm.cc), and a fused epilogue would have to wait for the K reduction.
#include "codegen/tile_choice.h"

#include <algorithm>

namespace dg {

namespace {

TileConfig default_tile(const Interval& m, int64_t N, int nb) {
  const int bn = (nb == 2 || N <= 64) ? 64 : 128;
  const int warps_n = nb == 2 ? bn / 32 : bn / 64;
  if (m.hi <= 32) return {32, bn, 32, 1, warps_n, 3};
  if (m.lo >= 1024) return {128, bn, 32, 4, warps_n, 2};
  return {64, bn, 32, 2, warps_n, 3};
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::vector<TileVariant> tile_variants(const SymExpr& M, int64_t N, int nb) {
  const Interval m = M.bounds();
  const TileConfig big = default_tile(m, N, nb);
  const int64_t lo = std::max<int64_t>(m.lo, 0);
  if (big.bm == 32) return {{big, lo, m.hi}};
  // The default tile launches two waves from M = fill on: ceil(M / BM) row tiles reach
  // ceil(2 kFillCtas / column tiles).
  const int64_t row_tiles = ceil_div(2 * kFillCtas, ceil_div(N, big.bn));
  const int64_t fill = big.bm * (row_tiles - 1) + 1;
  if (fill <= lo) return {{big, lo, m.hi}};
  // One warp tile of 32 x 64 (32 x 32 per operand for two): 32 HMMA per k16 step, as the
  // default's warps; its k16 steps shared by 4 warps (2 for two operands).
  const TileConfig small =
      nb == 2 ? TileConfig{32, 64, 32, 1, 2, 3, 2} : TileConfig{32, 64, 64, 1, 1, 2, 4};
  if (m.hi < fill) return {{small, lo, m.hi}};
  return {{big, fill, m.hi}, {small, lo, fill - 1}};
}

SymExpr variant_selector(const SymExpr& M, const TileVariant& v) {
  const SymExpr one(1), zero(0);
  SymExpr s = min(one, max(zero, M - SymExpr(v.m_lo - 1)));                         // M >= lo
  if (v.m_hi != Interval::kPosInf) s = min(s, max(zero, SymExpr(v.m_hi + 1) - M));  // M <= hi
  return s;
}

std::string variant_range_text(const TileVariant& v) {
  const bool open = v.m_hi == Interval::kPosInf;
  if (v.m_lo <= 0) return open ? "for every M" : "for M <= " + std::to_string(v.m_hi);
  if (open) return "for M >= " + std::to_string(v.m_lo);
  return "for " + std::to_string(v.m_lo) + " <= M <= " + std::to_string(v.m_hi);
}

}  // namespace dg
