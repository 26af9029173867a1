// bf16 conversions of the device layer, compiled as plain host C++: round to nearest even as
// PyTorch does, NaN kept NaN, exact widening. Checked against an independent reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "codegen/device/dg_types.cuh"

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t convert(uint32_t float_bits) { return dg_float_to_bf16(from_bits(float_bits)).bits; }

// The nearest of the two bf16 neighbours by value, ties to the even one; the bf16 above the
// largest finite one counts as 2^128, so values at or above the midpoint round to infinity.
uint16_t reference(uint32_t u) {
  const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  const uint32_t lo = mag >> 16, hi = lo + 1;
  if ((mag & 0xffffu) == 0) return static_cast<uint16_t>((sign >> 16) | lo);
  auto value = [](uint32_t h) {
    return h >= 0x7f80u ? std::ldexp(1.0, 128) : double(from_bits(h << 16));
  };
  const double x = double(from_bits(mag));
  const double dlo = x - value(lo), dhi = value(hi) - x;
  const uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint16_t>((sign >> 16) | pick);
}

bool is_nan_bf16(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

TEST(Bf16, TiesRoundToEven) {
  EXPECT_EQ(convert(0x3f808000u), 0x3f80u);  // 1 + 2^-8: tie, 0x3f80 is even
  EXPECT_EQ(convert(0x3f818000u), 0x3f82u);  // tie, 0x3f81 is odd: up
  EXPECT_EQ(convert(0x3f808001u), 0x3f81u);  // just above the tie
  EXPECT_EQ(convert(0x3f807fffu), 0x3f80u);  // just below
  EXPECT_EQ(convert(0xbf818000u), 0xbf82u);  // negative ties mirror
  EXPECT_EQ(convert(0x00008000u), 0x0000u);  // subnormal tie to zero
  EXPECT_EQ(convert(0x00018000u), 0x0002u);
}

TEST(Bf16, OverflowAndSpecials) {
  EXPECT_EQ(convert(0x7f7fffffu), 0x7f80u);  // FLT_MAX rounds to infinity
  EXPECT_EQ(convert(0x7f7f8000u), 0x7f80u);  // tie between odd max and infinity
  EXPECT_EQ(convert(0x7f7f7fffu), 0x7f7fu);
  EXPECT_EQ(convert(0x7f800000u), 0x7f80u);  // +inf
  EXPECT_EQ(convert(0xff800000u), 0xff80u);  // -inf
  EXPECT_EQ(convert(0x80000000u), 0x8000u);  // -0
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xff800001u, 0xffc00000u}) {
    EXPECT_TRUE(is_nan_bf16(convert(nan))) << std::hex << nan;  // never rounds to infinity
    EXPECT_EQ(convert(nan), 0x7fc0u) << std::hex << nan;        // PyTorch's CPU NaN
  }
}

TEST(Bf16, MatchesReferenceOnSampledFloats) {
  // Every 997th bit pattern (a prime stride reaches all exponents and low-bit residues).
  for (uint64_t u = 0; u <= 0xffffffffu; u += 997) {
    const uint32_t bits = static_cast<uint32_t>(u);
    if (std::isnan(from_bits(bits))) continue;
    ASSERT_EQ(convert(bits), reference(bits)) << std::hex << bits;
  }
}

TEST(Bf16, EveryBf16RoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = dg_bf16_to_float(dg_bf16_from_bits(static_cast<uint16_t>(h)));
    uint32_t fbits;
    std::memcpy(&fbits, &f, 4);
    EXPECT_EQ(fbits, h << 16);
    if (is_nan_bf16(static_cast<uint16_t>(h))) {
      EXPECT_TRUE(std::isnan(f));
    } else {
      ASSERT_EQ(dg_float_to_bf16(f).bits, h);
    }
  }
}

TEST(Bf16, PackedPairsPutTheFirstElementLow) {
  const dg_u32 p = dg_float2_to_bf16x2(1.0f, -2.0f);
  EXPECT_EQ(p, 0xc0003f80u);
  EXPECT_EQ(dg_bf16x2_lo(p), 1.0f);
  EXPECT_EQ(dg_bf16x2_hi(p), -2.0f);
  EXPECT_EQ(dg_pack_bf16x2(dg_bf16{0x1234}, dg_bf16{0xabcd}), 0xabcd1234u);
  EXPECT_EQ(dg_round_to_bf16(1.00390625f), 1.0f);
}

}  // namespace
