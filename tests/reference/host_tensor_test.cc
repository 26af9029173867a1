// HostTensor storage and conversions, the 16-bit float formats, random_tensor and compare.
#include <bit>
#include <cmath>
#include <limits>
#include <set>

#include "ref_test_util.h"
#include "runtime/reference/half_float.h"

namespace dg::testing {
namespace {

float f(uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(ReferenceHalfFloat, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(f(0x3f808000)), 0x3f80);  // 1 + 2^-8: a tie, to even (down)
  EXPECT_EQ(float_to_bf16_bits(f(0x3f818000)), 0x3f82);  // 1 + 3*2^-8: a tie, to even (up)
  EXPECT_EQ(float_to_bf16_bits(f(0x3f808001)), 0x3f81);  // just above the tie
  EXPECT_EQ(float_to_bf16_bits(f(0x3f807fff)), 0x3f80);  // just below it
  EXPECT_EQ(float_to_bf16_bits(-1.0f), 0xbf80);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bf16_bits_to_float(0x3f81), 1.0078125f);
}

TEST(ReferenceHalfFloat, Bf16KeepsNaN) {
  for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fff0000u, 0xff800001u}) {
    uint16_t b = float_to_bf16_bits(f(bits));
    EXPECT_TRUE(std::isnan(bf16_bits_to_float(b))) << std::hex << bits;
    EXPECT_EQ(b & 0x8000, (bits >> 16) & 0x8000) << "sign of " << std::hex << bits;
  }
}

// Property over a sweep of float bit patterns: the result is the nearer bf16 neighbour, and a tie
// goes to the even one.
TEST(ReferenceHalfFloat, Bf16SweepIsNearestEven) {
  for (uint64_t bits = 0; bits < 0x7f7fffffull; bits += 65521) {
    float x = f(static_cast<uint32_t>(bits));
    uint16_t down = static_cast<uint16_t>(bits >> 16), up = static_cast<uint16_t>(down + 1);
    double dd = x - static_cast<double>(bf16_bits_to_float(down));
    // Above the largest bf16 the next step up would be 2^128 (IEEE rounds past it to inf).
    double du = (up == 0x7f80 ? 0x1p128 : static_cast<double>(bf16_bits_to_float(up))) - x;
    uint16_t want = dd < du ? down : (du < dd ? up : ((down & 1) ? up : down));
    ASSERT_EQ(float_to_bf16_bits(x), want) << std::hex << bits;
  }
}

TEST(ReferenceHalfFloat, F16RoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float v = f16_bits_to_float(static_cast<uint16_t>(b));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(v))));
    } else {
      ASSERT_EQ(float_to_f16_bits(v), b) << std::hex << b;
    }
  }
  EXPECT_EQ(f16_bits_to_float(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(f16_bits_to_float(0x7bff), 65504.0f);
}

TEST(ReferenceHalfFloat, F16RoundsToNearestEven) {
  EXPECT_EQ(float_to_f16_bits(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);         // the tie above the max goes to inf
  EXPECT_EQ(float_to_f16_bits(1.0f + 0x1p-11f), 0x3c00);  // tie, to even
  EXPECT_EQ(float_to_f16_bits(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(float_to_f16_bits(0x1p-25f), 0x0000);  // tie between 0 and 2^-24
  EXPECT_EQ(float_to_f16_bits(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(float_to_f16_bits(3 * 0x1p-25f), 0x0002);  // tie between 1 and 2 units: even
  EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000);
#ifdef __FLT16_MAX__
  // The compiler's own _Float16 conversion as an oracle, over a sweep of patterns.
  for (uint64_t bits = 0; bits < 0xffffffffull; bits += 4099) {
    float x = f(static_cast<uint32_t>(bits));
    if (std::isnan(x)) continue;
    ASSERT_EQ(float_to_f16_bits(x), std::bit_cast<uint16_t>(static_cast<_Float16>(x)))
        << std::hex << bits;
  }
#endif
}

TEST(ReferenceHostTensor, ElementConversions) {
  HostTensor i32 = make_tensor(DType::kI32, {4});
  i32.set(0, -2.9);                      // truncates toward zero
  i32.set(1, std::nan(""));              // NaN -> minimum
  i32.set(2, 3e9);                       // out of range -> minimum
  i32.set_int(3, int64_t{1} << 32 | 5);  // wraps
  EXPECT_EQ(values(i32), (Vals{-2, -2147483648.0, -2147483648.0, 5}));
  HostTensor b = make_tensor(DType::kBool, {3}, {0, -0.5, std::nan("")});
  EXPECT_EQ(values(b), (Vals{0, 1, 1}));
  HostTensor i64 = make_tensor(DType::kI64, {1});
  i64.set_int(0, (int64_t{1} << 62) + 1);
  EXPECT_EQ(i64.get_int(0), (int64_t{1} << 62) + 1);  // exact, not through double
  // double -> bf16 goes through float (two roundings), as PyTorch does.
  EXPECT_EQ(round_to_dtype<double>(DType::kBF16, 1 + 0x1p-8 + 0x1p-30), 1.0);
  // int64 -> bf16 goes through float too.
  EXPECT_EQ(round_to_dtype<int64_t>(DType::kBF16, 16842753), 16777216);
  EXPECT_EQ(make_tensor(DType::kF16, {}, {0.1}).get(0), 0.0999755859375);
  EXPECT_EQ(make_sym_int(7).get_int(0), 7);
  EXPECT_EQ(make_sym_int(7).rank(), 0);
}

TEST(ReferenceHostTensor, ShapeAndConsistency) {
  HostTensor t = make_tensor(DType::kBF16, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.bytes.size(), 12u);
  EXPECT_TRUE(t.consistent());
  t.bytes.pop_back();
  EXPECT_FALSE(t.consistent());
  EXPECT_EQ(make_tensor(DType::kF32, {}).numel(), 1);
  EXPECT_EQ((HostTensor{DType::kF32, {-1}, {}}).numel(), -1);
  EXPECT_EQ((HostTensor{DType::kF32, {int64_t{1} << 40, int64_t{1} << 40}, {}}).numel(), -1);
  EXPECT_THROW(make_tensor(DType::kF32, {-2}), std::invalid_argument);
  EXPECT_THROW(make_tensor(DType::kF32, {2}, {1.0}), std::invalid_argument);
  EXPECT_EQ(t.to_string(), "bf16[2, 3]");
}

TEST(ReferenceRandom, DeterministicAndInBounds) {
  HostTensor a = random_tensor(DType::kBF16, {64}, 7, -2, 3);
  HostTensor b = random_tensor(DType::kBF16, {64}, 7, -2, 3);
  HostTensor c = random_tensor(DType::kBF16, {64}, 8, -2, 3);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_NE(a.bytes, c.bytes);
  for (double v : values(a)) EXPECT_TRUE(v >= -2 && v <= 3) << v;  // rounding may reach hi
  HostTensor idx = random_tensor(DType::kI64, {1000}, 1, 0, 5);
  std::set<double> seen;
  for (double v : values(idx)) seen.insert(v);
  EXPECT_EQ(seen, (std::set<double>{0, 1, 2, 3, 4}));
  HostTensor flags = random_tensor(DType::kBool, {100}, 3);
  double ones = 0;
  for (double v : values(flags)) ones += v;
  EXPECT_GT(ones, 20);
  EXPECT_LT(ones, 80);
  EXPECT_THROW(random_tensor(DType::kI32, {2}, 1, 3, 3), std::invalid_argument);
}

TEST(ReferenceCompare, Tolerances) {
  HostTensor e = make_tensor(DType::kF32, {4}, {1, -2, std::nan(""), INFINITY});
  HostTensor same = e;
  CompareResult r = compare(same, e, 0, 0);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.max_abs_err, 0);

  HostTensor close = make_tensor(DType::kF32, {4}, {1.001, -2, std::nan(""), INFINITY});
  EXPECT_FALSE(compare(close, e, 1e-4, 0).ok);
  EXPECT_TRUE(compare(close, e, 2e-3, 0).ok);
  EXPECT_TRUE(compare(close, e, 0, 2e-3).ok);
  r = compare(close, e, 1e-4, 1e-5);
  EXPECT_EQ(r.worst_index, 0);
  EXPECT_NEAR(r.max_abs_err, 1e-3, 1e-6);
  EXPECT_NEAR(r.max_rel_err, 1e-3, 1e-6);
  EXPECT_NE(r.message.find("[0]"), std::string::npos) << r.message;

  HostTensor nan_vs_num = make_tensor(DType::kF32, {4}, {1, -2, 0, INFINITY});
  r = compare(nan_vs_num, e, 1, 1);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst_index, 2);
  HostTensor wrong_inf = make_tensor(DType::kF32, {4}, {1, -2, std::nan(""), -INFINITY});
  EXPECT_FALSE(compare(wrong_inf, e, 1, 1).ok);

  r = compare(make_tensor(DType::kF32, {2, 2}), make_tensor(DType::kF32, {4}), 1, 1);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("shape"), std::string::npos);
  // Integers compare exactly, beyond double precision too.
  HostTensor big = make_tensor(DType::kI64, {1}), big1 = big;
  big.set_int(0, (int64_t{1} << 60) + 1);
  big1.set_int(0, int64_t{1} << 60);
  EXPECT_FALSE(compare(big, big1, default_tolerance(DType::kI64)).ok);
}

TEST(ReferenceCompare, DefaultTolerances) {
  Tolerance bf16 = default_tolerance(DType::kBF16), f16 = default_tolerance(DType::kF16);
  Tolerance f32 = default_tolerance(DType::kF32), f64 = default_tolerance(DType::kF64);
  EXPECT_DOUBLE_EQ(bf16.rtol, 1.6e-2);
  EXPECT_GT(bf16.rtol, f16.rtol);
  EXPECT_GT(f16.rtol, f32.rtol);
  EXPECT_GT(f32.rtol, f64.rtol);
  for (DType t : {DType::kI32, DType::kI64, DType::kBool}) {
    EXPECT_EQ(default_tolerance(t).rtol, 0);
    EXPECT_EQ(default_tolerance(t).atol, 0);
  }
  // One bf16 ulp passes the bf16 default; at 1.5, six (0.047) exceed 0.01 + 0.016 * 1.5.
  HostTensor e = make_tensor(DType::kBF16, {1}, {1.5});
  HostTensor one_ulp = make_tensor(DType::kBF16, {1}, {1.5 + 0x1p-7});
  HostTensor six_ulps = make_tensor(DType::kBF16, {1}, {1.5 + 6 * 0x1p-7});
  EXPECT_TRUE(compare(one_ulp, e, bf16).ok);
  EXPECT_FALSE(compare(six_ulps, e, bf16).ok);
}

}  // namespace
}  // namespace dg::testing
