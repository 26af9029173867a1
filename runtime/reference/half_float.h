// Bit-level conversions between float and the two 16-bit float formats (bf16, IEEE half).
//
// Note [16-bit rounding]
// float -> bf16 and float -> f16 round to nearest, ties to even, as c10::BFloat16 and c10::Half
// do; overflow goes to infinity; NaN stays NaN (sign and the top payload bits are kept, the quiet
// bit is set). Wider sources (double, int64) are first converted to float, as PyTorch's
// conversions do, so a double is rounded twice on its way to bf16 or f16.
#pragma once
#include <cstdint>

namespace dg {

float bf16_bits_to_float(uint16_t bits);
uint16_t float_to_bf16_bits(float value);
float f16_bits_to_float(uint16_t bits);
uint16_t float_to_f16_bits(float value);

}  // namespace dg
