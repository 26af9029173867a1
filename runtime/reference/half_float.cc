#include "runtime/reference/half_float.h"

#include <bit>

namespace dg {
namespace {

// Shifts `m` right by `shift` bits (1..31), rounding to nearest with ties to even.
uint32_t shift_round_even(uint32_t m, int shift) {
  uint32_t q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  return q;
}

}  // namespace

float bf16_bits_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// The device layer's rule (Note [bf16 rounding] in codegen/device/dg_types.cuh).
uint16_t float_to_bf16_bits(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN
  uint32_t bias = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + bias) >> 16);  // a carry into the exponent is correct
}

float f16_bits_to_float(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// The device layer's rule (Note [f16 rounding] in codegen/device/dg_types.cuh).
uint16_t float_to_f16_bits(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  if (ax >= 0x38800000u) {  // normal half: rebias the exponent, round 23 -> 10 mantissa bits
    return static_cast<uint16_t>(sign | shift_round_even(ax - 0x38000000u, 13));
  }
  if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 rounds to (signed) zero
  // Subnormal half: the value in units of 2^-24 is m * 2^(e - 126).
  uint32_t e = ax >> 23;
  uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | shift_round_even(m, static_cast<int>(126 - e)));
}

}  // namespace dg
