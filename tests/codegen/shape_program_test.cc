#include "runtime/shape_program.h"

#include <gtest/gtest.h>

#include <random>

namespace dg {
namespace {

TEST(ShapeProgram, EvaluatesLikeSymExprEvaluate) {
  SymExpr s = SymExpr::symbol("s", 0, 1 << 20), t = SymExpr::symbol("t", 1, 64);
  std::vector<SymExpr> exprs = {SymExpr(7),
                                s,
                                s * t + 3,
                                floordiv(s + 63, 64),
                                mod(s * 3 + 1, 16),
                                max(s, t * 4),
                                min(floordiv(s * t, 5), SymExpr(65535)),
                                (s + 1) * (s - t),
                                ceildiv(s * 2048, SymExpr(256))};
  ShapeProgram p = ShapeProgram::compile({s, t}, exprs);
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 500; ++trial) {
    int64_t sv = static_cast<int64_t>(rng() % 5000), tv = 1 + static_cast<int64_t>(rng() % 64);
    int64_t vals[2] = {sv, tv};
    std::vector<int64_t> out(exprs.size());
    ASSERT_TRUE(p.run(vals, out.data()));
    for (size_t i = 0; i < exprs.size(); ++i)
      EXPECT_EQ(out[i], *exprs[i].evaluate({{"s", sv}, {"t", tv}})) << exprs[i].to_string();
  }
}

TEST(ShapeProgram, OverflowIsReportedNotWrapped) {
  SymExpr s = SymExpr::symbol("s", 0);
  ShapeProgram p = ShapeProgram::compile({s}, {s * s * s});
  int64_t v = int64_t{1} << 30, out = 0;
  EXPECT_FALSE(p.run(&v, &out));
}

TEST(ShapeProgram, UnknownSymbolIsRejectedAtCompileTime) {
  SymExpr s = SymExpr::symbol("s", 0), u = SymExpr::symbol("u", 0);
  EXPECT_THROW(ShapeProgram::compile({s}, {s + u}), std::invalid_argument);
}

}  // namespace
}  // namespace dg
