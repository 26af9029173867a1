// Unit tests for SymExpr (see Note [SymExpr canonical form]): canonical forms are interned nodes,
// facts drive floordiv / mod / max / min, and printing is the text form's expression syntax.
#include "ir/sym_expr.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace dg {
namespace {

class IrSymExpr : public ::testing::Test {
 protected:
  SymExpr s = SymExpr::symbol("s", 2);                         // a Dynamo token count
  SymExpr t = SymExpr::symbol("t", 0, 15);                     // small and bounded
  SymExpr u = SymExpr::symbol("u", 0, Interval::kPosInf, 16);  // a multiple of 16
  SymExpr n = SymExpr::symbol("n", -10, 10);                   // may be negative
};

TEST_F(IrSymExpr, EqualExpressionsAreTheSameNode) {
  EXPECT_EQ((s * 2 + 1).node(), (1 + 2 * s).node());
  EXPECT_EQ(s + s, 2 * s);
  EXPECT_EQ(s - s, SymExpr(0));
  EXPECT_EQ((s + 1) * (s - 1), s * s - 1);
  EXPECT_EQ(s * t, t * s);
  EXPECT_EQ(s * (t + 1), s * t + s);
  EXPECT_EQ(-(-s), s);
  EXPECT_EQ(SymExpr(3) * 4 - 12, SymExpr(0));
  EXPECT_NE(s, SymExpr::symbol("s", 2, 100));  // facts are part of a symbol's identity
  EXPECT_EQ(s, SymExpr::symbol("s", 2));
  EXPECT_EQ(SymExpr::symbol("k", 5, 5), SymExpr(5));  // a one-value symbol is that value
}

TEST_F(IrSymExpr, Queries) {
  EXPECT_TRUE(SymExpr(7).is_const());
  EXPECT_EQ((s - s + 7).as_const(), 7);
  EXPECT_FALSE((s + 1).as_const());
  EXPECT_TRUE(s.is_symbol());
  EXPECT_FALSE((2 * s).is_symbol());
  EXPECT_EQ(s.symbol_name(), "s");
  EXPECT_EQ(u.symbol_divisor(), 16);
  EXPECT_EQ(t.symbol_range().hi, 15);
  auto free = (s * t + floordiv(u, s)).free_symbols();
  ASSERT_EQ(free.size(), 3u);
  EXPECT_EQ(free, (s * t + floordiv(u, s)).free_symbols());  // deterministic
}

TEST_F(IrSymExpr, Printing) {
  EXPECT_EQ((1 + 2 * s).to_string(), "2*s + 1");
  EXPECT_EQ((3 - 2 * s).to_string(), "-2*s + 3");
  EXPECT_EQ((-s - t).to_string(), "-s - t");
  EXPECT_EQ((t * s + s).to_string(), "s + s*t");
  EXPECT_EQ((2 * s * t - 3 * s + 7).to_string(), "-3*s + 2*s*t + 7");
  EXPECT_EQ(ceildiv(s, 64).to_string(), "floordiv(s + 63, 64)");
  EXPECT_EQ((-floordiv(s, 4)).to_string(), "-floordiv(s, 4)");
  EXPECT_EQ(min(t, 7).to_string(), "min(7, t)");
  EXPECT_EQ(SymExpr(-5).to_string(), "-5");
  // INT64_MIN prints without overflowing (fixed in sym_node.cc).
  EXPECT_EQ(SymExpr(INT64_MIN).to_string(), "-9223372036854775808");
  EXPECT_EQ((s + SymExpr(INT64_MIN)).to_string(), "s - 9223372036854775808");
  EXPECT_EQ((s + SymExpr(INT64_MIN) * t).to_string(), "s - 9223372036854775808*t");
}

TEST_F(IrSymExpr, FloorDivRules) {
  EXPECT_EQ(floordiv(2 * s + 4, 2), s + 2);  // exact parts come out
  EXPECT_EQ(floordiv(4 * s + 3, 4), s);      // remainder 3 < 4
  EXPECT_EQ(floordiv(s + 7, 4), floordiv(s + 3, 4) + 1);
  EXPECT_EQ(floordiv(s, 1), s);
  EXPECT_EQ(floordiv(t, 16), SymExpr(0));  // t in [0, 15]
  EXPECT_EQ(floordiv(t + 16, 16), SymExpr(1));
  EXPECT_EQ(floordiv(floordiv(s, 2), 3), floordiv(s, 6));
  EXPECT_EQ(floordiv(s, s), SymExpr(1));             // s >= 2
  EXPECT_EQ(floordiv(SymExpr(-7), 2), SymExpr(-4));  // floor, not truncation
  EXPECT_EQ(floordiv(SymExpr(7), -2), SymExpr(-4));
  EXPECT_EQ(floordiv(-2 * s - 1, 2), -s - 1);
  EXPECT_THROW(floordiv(s, 0), std::domain_error);
  EXPECT_THROW(floordiv(s, s - s), std::domain_error);
}

TEST_F(IrSymExpr, ModRules) {
  EXPECT_EQ(mod(u, 16), SymExpr(0));  // divisor fact
  EXPECT_EQ(mod(u, 8), SymExpr(0));
  EXPECT_EQ(mod(2 * u + 64, 64), mod(2 * u, 64));  // multiples of 64 drop out
  EXPECT_NE(mod(2 * u + 32, 64), mod(2 * u, 64));
  EXPECT_EQ(mod(t, 16), t);  // range fact
  EXPECT_EQ(mod(t + 16, 16), t);
  EXPECT_EQ(mod(s + 5, 4), mod(s + 1, 4));
  EXPECT_EQ(mod(4 * s + 6, 4), SymExpr(2));
  EXPECT_EQ(mod(s, 1), SymExpr(0));
  EXPECT_EQ(mod(s, s), SymExpr(0));
  EXPECT_EQ(mod(SymExpr(-7), 3), SymExpr(2));  // floor semantics
  EXPECT_EQ(mod(SymExpr(7), -3), SymExpr(-2));
  EXPECT_EQ(mod(n, 3).bounds().lo, 0);
  EXPECT_EQ(mod(n, 3).bounds().hi, 2);
  EXPECT_THROW(mod(s, 0), std::domain_error);
}

TEST_F(IrSymExpr, MaxMinUseRanges) {
  EXPECT_EQ(max(s, 1), s);  // s >= 2
  EXPECT_EQ(min(s, 1), SymExpr(1));
  EXPECT_EQ(max(s, t), max(t, s));  // commutative operands are ordered
  EXPECT_EQ(max(s, s), s);
  EXPECT_EQ(min(s + 1, s), s);
  EXPECT_EQ(max(t, 20), SymExpr(20));  // t <= 15
  EXPECT_EQ(max(n, 0).bounds().lo, 0);
  EXPECT_EQ(max(n, 0).bounds().hi, 10);
  EXPECT_EQ(min(t, 7).bounds().hi, 7);
  EXPECT_TRUE(provably_ge(max(s, t), 2));
  EXPECT_FALSE(provably_ge(t, s));  // not proven either way
  EXPECT_FALSE(provably_ge(s, t));
}

TEST_F(IrSymExpr, BoundsAndDivisors) {
  Interval b = (2 * s + 1).bounds();
  EXPECT_EQ(b.lo, 5);
  EXPECT_EQ(b.hi, Interval::kPosInf);
  b = (3 - s).bounds();
  EXPECT_EQ(b.lo, Interval::kNegInf);
  EXPECT_EQ(b.hi, 1);
  b = (t * t).bounds();
  EXPECT_EQ(b.lo, 0);
  EXPECT_EQ(b.hi, 225);
  b = floordiv(s + 3, 4).bounds();
  EXPECT_EQ(b.lo, 1);
  EXPECT_EQ((4 * u + 32).divisor(), 32);
  EXPECT_EQ((4 * u + 64).divisor(), 64);
  EXPECT_EQ((6 * s + 9).divisor(), 3);
  EXPECT_EQ(SymExpr(0).divisor(), 0);
  // Bounds stay sound next to INT64_MIN, which interval arithmetic reads as -inf (fixed).
  SymExpr low = s + SymExpr(INT64_MIN);
  EXPECT_TRUE(low.bounds().contains(*low.evaluate({{"s", 2}})));
  EXPECT_GT(SymExpr(INT64_MIN).divisor(), 0);
  EXPECT_GT((s + SymExpr(INT64_MIN)).divisor(), 0);
}

TEST_F(IrSymExpr, EvaluateAndSubstitute) {
  SymExpr e = floordiv(s * t + 5, 4) - mod(u, 32) + max(s, t);
  EXPECT_EQ(e.evaluate({{"s", 6}, {"t", 3}, {"u", 48}}), (6 * 3 + 5) / 4 - 16 + 6);
  EXPECT_FALSE(e.evaluate({{"s", 6}}));                         // t and u unbound
  EXPECT_FALSE((s * SymExpr(INT64_MAX)).evaluate({{"s", 2}}));  // overflow
  EXPECT_FALSE(floordiv(s, t).evaluate({{"s", 2}, {"t", 0}}));  // division by zero
  EXPECT_EQ(e.substitute([](const SymExpr& x) { return x; }), e);
  SymExpr r = (2 * s + 1).substitute([&](const SymExpr& x) { return x == s ? t + 1 : x; });
  EXPECT_EQ(r, 2 * t + 3);
  EXPECT_EQ(floordiv(s, 4).substitute([](const SymExpr&) { return SymExpr(9); }), SymExpr(2));
}

// Fixed: floor division and modulo near INT64_MIN (a trap and two signed overflows).
TEST_F(IrSymExpr, ExtremeFloorDivisionAndModulo) {
  EXPECT_THROW(floordiv(SymExpr(INT64_MIN), -1), std::overflow_error);
  EXPECT_EQ(mod(SymExpr(INT64_MIN), -1), SymExpr(0));
  EXPECT_EQ(mod(SymExpr(INT64_MIN + 1), 3), SymExpr(2));
  EXPECT_EQ(floordiv(SymExpr(INT64_MIN + 1), 3), SymExpr(-3074457345618258603));
  SymExpr m = mod(n, t), q = floordiv(n, t);
  EXPECT_EQ(m.evaluate({{"n", INT64_MIN + 1}, {"t", 3}}), 2);
  EXPECT_EQ(m.evaluate({{"n", INT64_MIN}, {"t", -1}}), 0);
  EXPECT_FALSE(q.evaluate({{"n", INT64_MIN}, {"t", -1}}));
  EXPECT_EQ(q.evaluate({{"n", 7}, {"t", -1}}), -7);
}

TEST_F(IrSymExpr, OverflowThrows) {
  EXPECT_THROW(SymExpr(INT64_MAX) + 1, std::overflow_error);
  EXPECT_THROW(SymExpr(INT64_MIN) * -1, std::overflow_error);
  EXPECT_THROW(s * SymExpr(INT64_MAX) + s * SymExpr(INT64_MAX), std::overflow_error);
  EXPECT_THROW(SymExpr::symbol("bad", 3, 2), std::invalid_argument);
  EXPECT_THROW(SymExpr::symbol("bad", 0, 2, 0), std::invalid_argument);
}

}  // namespace
}  // namespace dg
