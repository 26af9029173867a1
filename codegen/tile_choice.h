// Internal: the tensor-core GEMM's tiles, and which one each call runs by its runtime M
// (Note [Tile choice] in tile_choice.cc).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/sym_expr.h"

namespace dg {

// The SM count of the H100 and H200 (Note [Tile choice]): blocks per wave of a kernel that runs one
// block per SM at a time.
constexpr int64_t kFillCtas = 132;

struct TileConfig {
  int bm, bn, bk, warps_m, warps_n, stages;
  int slices_k = 1;  // warps per warp tile, each on a share of K (Note [Sliced K])
  int threads() const { return 32 * warps_m * warps_n * slices_k; }
};

// A tile and the token counts M it runs for: lo <= M <= hi (hi may be Interval::kPosInf).
struct TileVariant {
  TileConfig tile;
  int64_t m_lo, m_hi;
};

// The variants one compile of a GEMM holds, covering M's range without overlap, the default
// (largest) tile first. One variant when M's range needs no other.
std::vector<TileVariant> tile_variants(const SymExpr& M, int64_t N, int nb);

// 1 when M lies in the variant's range, else 0: a grid extent that launches exactly one variant
// per call (a launch with a zero extent is skipped, codegen/kernel_plan.h).
SymExpr variant_selector(const SymExpr& M, const TileVariant& v);

// "for M <= 512", "for M >= 513", "for 33 <= M <= 512": the variant's range for summaries.
std::string variant_range_text(const TileVariant& v);

}  // namespace dg
