// bf16 storage type and float <-> bf16 conversions. dyngen uses its own type rather than
// cuda_bf16.h so the same code compiles under NVRTC without CUDA's headers and on the host.
#pragma once
#include "dg_config.cuh"

// bfloat16 as its 16 raw bits. Trivial, so it can live in __shared__ arrays.
struct alignas(2) dg_bf16 {
  dg_u16 bits;
};

DG_DEVICE dg_u32 dg_float_as_bits(float f) {
#if defined(DG_ON_GPU)
  return __float_as_uint(f);
#else
  dg_u32 u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
#endif
}

DG_DEVICE float dg_bits_as_float(dg_u32 u) {
#if defined(DG_ON_GPU)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Note [bf16 rounding]
// Float -> bf16 rounds to nearest, ties to even, as PyTorch does. The
// software form is PyTorch's CPU formula (c10::detail::round_to_nearest_even): add 0x7FFF plus the
// lowest kept bit, then truncate; overflow carries into the exponent and gives infinity, as RNE
// must. NaN is tested on the bits (robust to -ffast-math) and becomes the quiet NaN 0x7FC0. On a
// GPU (sm_80+) the hardware cvt.rn.bf16 rounds identically; its NaN is 0x7FFF, which is what
// PyTorch's CUDA kernels produce. So results agree bit for bit except for NaN payloads.
// Note [bf16 rounding].
DG_DEVICE dg_u16 dg_float_to_bf16_bits_rne(float f) {
  dg_u32 u = dg_float_as_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return static_cast<dg_u16>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

DG_DEVICE dg_bf16 dg_float_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  dg_u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return dg_bf16{h};
#else
  return dg_bf16{dg_float_to_bf16_bits_rne(f)};
#endif
}

// Exact: every bf16 is a float.
DG_DEVICE float dg_bf16_to_float(dg_bf16 h) { return dg_bits_as_float(dg_u32{h.bits} << 16); }

// float -> bf16 -> float: the value a bf16 tensor would store. On sm_80+ one instruction: f
// converted into the upper half of a bf16 pair whose lower half is +0 is the rounded float's bits
// (cvt.rn.bf16.f32 and a shift back took two, on every rounding of a fused epilogue's bf16 ops).
DG_DEVICE float dg_round_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  dg_u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(f), "f"(0.0f));  // first source -> upper
  return dg_bits_as_float(r);
#else
  return dg_bf16_to_float(dg_float_to_bf16(f));
#endif
}

DG_DEVICE dg_bf16 dg_bf16_from_bits(dg_u16 bits) { return dg_bf16{bits}; }

// Packed pairs, as mma and ldmatrix registers hold them: element 0 in the low 16 bits.
DG_DEVICE dg_u32 dg_pack_bf16x2(dg_bf16 lo, dg_bf16 hi) {
  return dg_u32{lo.bits} | (dg_u32{hi.bits} << 16);
}

DG_DEVICE dg_u32 dg_float2_to_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  dg_u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));  // first source -> upper
  return r;
#else
  return dg_pack_bf16x2(dg_float_to_bf16(lo), dg_float_to_bf16(hi));
#endif
}

DG_DEVICE float dg_bf16x2_lo(dg_u32 packed) { return dg_bits_as_float(packed << 16); }
DG_DEVICE float dg_bf16x2_hi(dg_u32 packed) { return dg_bits_as_float(packed & 0xffff0000u); }

// float16 as its 16 raw bits (IEEE binary16), like dg_bf16.
struct alignas(2) dg_f16 {
  dg_u16 bits;
};

// Note [f16 rounding]
// Float -> f16 rounds to nearest, ties to even, with overflow to infinity
// and subnormals, as PyTorch (c10::Half) does; NaN stays NaN (quiet). The GPU uses the hardware
// conversions, which round the same way.
DG_DEVICE dg_u32 dg_shift_round_even(dg_u32 m, int shift) {
  dg_u32 q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  return (rem > half || (rem == half && (q & 1u))) ? q + 1u : q;
}

// Note [f16 rounding].
DG_DEVICE dg_f16 dg_float_to_f16(float f) {
#if defined(DG_ON_GPU)
  dg_u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return dg_f16{h};
#else
  dg_u32 x = dg_float_as_bits(f);
  dg_u32 sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return dg_f16{static_cast<dg_u16>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu))};
  if (ax >= 0x477ff000u) return dg_f16{static_cast<dg_u16>(sign | 0x7c00u)};
  if (ax >= 0x38800000u)
    return dg_f16{static_cast<dg_u16>(sign | dg_shift_round_even(ax - 0x38000000u, 13))};
  if (ax <= 0x33000000u) return dg_f16{static_cast<dg_u16>(sign)};
  dg_u32 e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
  return dg_f16{static_cast<dg_u16>(sign | dg_shift_round_even(m, static_cast<int>(126 - e)))};
#endif
}

// Exact: every f16 is a float.
DG_DEVICE float dg_f16_to_float(dg_f16 h) {
#if defined(DG_ON_GPU)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
#else
  dg_u32 sign = static_cast<dg_u32>(h.bits & 0x8000u) << 16;
  dg_u32 exp = (h.bits >> 10) & 0x1fu, mant = h.bits & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return dg_bits_as_float(sign | 0x7f800000u | (mant << 13));
  return dg_bits_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}
