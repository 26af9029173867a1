// Note [Tile choice]: the variants a tensor-core GEMM holds cover M's range without gaps or
// overlap, their selectors launch exactly the one whose range holds M, and the default tile runs
// only where it launches two waves on an H100/H200 (132 SMs).
#include "codegen/tile_choice.h"

#include <gtest/gtest.h>

namespace dg {
namespace {

int64_t blocks(const TileConfig& t, int64_t m, int64_t n) {
  return (m + t.bm - 1) / t.bm * ((n + t.bn - 1) / t.bn);
}

struct Case {
  int64_t lo, hi, n;
  int nb;
};

TEST(TileChoice, VariantsPartitionTheRangeAndSelectorsLaunchOne) {
  const Case cases[] = {{2, Interval::kPosInf, 1024, 2},
                        {2, Interval::kPosInf, 1024, 1},
                        {0, Interval::kPosInf, 2048, 1},
                        {2, Interval::kPosInf, 64, 1},
                        {0, 300, 2048, 1},
                        {1024, Interval::kPosInf, 2048, 1},
                        {0, 32, 4096, 2},
                        {2, Interval::kPosInf, 12800, 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE("M in [" + std::to_string(c.lo) + ", " + std::to_string(c.hi) +
                 "], N = " + std::to_string(c.n) + ", nb = " + std::to_string(c.nb));
    const SymExpr M = SymExpr::symbol("m", c.lo, c.hi);
    const std::vector<TileVariant> variants = tile_variants(M, c.n, c.nb);
    ASSERT_FALSE(variants.empty());
    ASSERT_LE(variants.size(), 2u);
    // The default first, covering the top of the range; the small tile below it.
    EXPECT_EQ(variants.front().m_hi, c.hi);
    EXPECT_EQ(variants.back().m_lo, c.lo);
    for (size_t v = 1; v < variants.size(); ++v)
      EXPECT_EQ(variants[v].m_hi + 1, variants[v - 1].m_lo);
    const int64_t last = c.hi == Interval::kPosInf ? 5000 : c.hi;
    for (int64_t m = c.lo; m <= last; ++m) {
      int launched = 0;
      for (const TileVariant& v : variants) {
        const int64_t on = variant_selector(M, v).evaluate({{"m", m}}).value();
        ASSERT_TRUE(on == 0 || on == 1);
        EXPECT_EQ(on == 1, v.m_lo <= m && m <= v.m_hi) << "m = " << m;
        launched += static_cast<int>(on);
      }
      ASSERT_EQ(launched, 1) << "m = " << m;
    }
    if (variants.size() == 2) {
      const TileVariant& big = variants[0];
      EXPECT_GE(blocks(big.tile, big.m_lo, c.n), 2 * 132) << "the default fills two waves";
      EXPECT_LT(blocks(big.tile, big.m_lo - 1, c.n), 2 * 132) << "and not below its range";
      EXPECT_EQ(variants[1].tile.bm, 32);
    }
  }
}

// The seed's (OLMoE) GEMMs: where each switches to its default tile.
TEST(TileChoice, SeedShapesSwitchWhereTheDefaultFillsTwoWaves) {
  const SymExpr s = SymExpr::symbol("s", 2, Interval::kPosInf);
  EXPECT_EQ(tile_variants(s, 1024, 2)[0].m_lo, 1025);  // forward gate/up: 64 x 64 tiles
  EXPECT_EQ(tile_variants(s, 2048, 1)[0].m_lo, 1025);  // forward down, backward grad_x
  EXPECT_EQ(tile_variants(s, 1024, 1)[0].m_lo, 2049);  // backward dgrad: 64 x 128 tiles
  // Phi-3.5-MoE's gate/up (N = 6400, two B operands) fills two waves from 129 tokens.
  EXPECT_EQ(tile_variants(s, 6400, 2)[0].m_lo, 129);
  // A range that needs one tile: all 32-row, or all past the switch.
  EXPECT_EQ(tile_variants(SymExpr::symbol("s", 1, 32), 1024, 2).size(), 1u);
  EXPECT_EQ(tile_variants(SymExpr::symbol("s", 4096, Interval::kPosInf), 2048, 1).size(), 1u);
  EXPECT_EQ(variant_range_text(tile_variants(s, 2048, 1)[1]), "for 2 <= M <= 1024");
  EXPECT_EQ(variant_range_text(tile_variants(s, 2048, 1)[0]), "for M >= 1025");
}

}  // namespace
}  // namespace dg
