// dyngen device layer: the scalar helpers generated kernels call (conversions between storage
// and compute types, math in PyTorch's formulation, symbolic-index arithmetic, atomics).
// The code generator spells ops through these names (codegen/scalar_ops.cc).
#pragma once
#include "dg_device.cuh"

#if !defined(DG_ON_GPU)
#include <math.h>
#endif

// ---- index arithmetic with floor semantics (symbolic dims) ----------------------------------
DG_DEVICE long long dg_floordiv(long long a, long long b) {
  long long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
DG_DEVICE long long dg_mod(long long a, long long b) { return a - dg_floordiv(a, b) * b; }
DG_DEVICE long long dg_max_ll(long long a, long long b) { return a > b ? a : b; }
DG_DEVICE long long dg_min_ll(long long a, long long b) { return a < b ? a : b; }
// A gather/scatter index wrapped once like PyTorch's negative indices; -1 when out of range.
DG_DEVICE long long dg_wrap_index(long long ix, long long n) {
  if (ix < 0) ix += n;
  return (ix >= 0 && ix < n) ? ix : -1;
}
// Note [Out-of-range indices] (codegen/emit_index.cc): what a bad index poisons a result with.
DG_DEVICE float dg_nan() { return __int_as_float(0x7fc00000); }

// ---- conversions: storage -> compute type -> storage ------------------------------------------
DG_DEVICE float dg_widen(dg_bf16 x) { return dg_bf16_to_float(x); }
DG_DEVICE float dg_widen(dg_f16 x) { return dg_f16_to_float(x); }
DG_DEVICE float dg_widen(float x) { return x; }
DG_DEVICE double dg_widen(double x) { return x; }
DG_DEVICE long long dg_widen(long long x) { return x; }
DG_DEVICE long long dg_widen(int x) { return x; }
DG_DEVICE bool dg_widen(bool x) { return x; }

template <class To>
struct dg_narrow {
  template <class From>
  DG_DEVICE static To from(From x) {
    return static_cast<To>(x);
  }
};
template <>
struct dg_narrow<bool> {
  template <class From>
  DG_DEVICE static bool from(From x) {
    return x != From(0);
  }
};
template <>
struct dg_narrow<dg_bf16> {
  // double -> float -> bf16, as c10::BFloat16 does.
  template <class From>
  DG_DEVICE static dg_bf16 from(From x) {
    return dg_float_to_bf16(static_cast<float>(x));
  }
};

template <>
struct dg_narrow<dg_f16> {
  // double -> float -> f16, as c10::Half does.
  template <class From>
  DG_DEVICE static dg_f16 from(From x) {
    return dg_float_to_f16(static_cast<float>(x));
  }
};

template <class To, class From>
DG_DEVICE To dg_convert(From x) {
  return dg_narrow<To>::from(dg_widen(x));
}

// x rounded to Storage and read back as Compute: the value a Storage tensor holds, as the fused
// kernels compute with it (one instruction for bf16, dg_round_to_bf16).
template <class Storage, class Compute>
struct dg_rounded {
  template <class From>
  DG_DEVICE static Compute from(From x) {
    return dg_convert<Compute>(dg_convert<Storage>(x));
  }
};
template <>
struct dg_rounded<dg_bf16, float> {
  template <class From>
  DG_DEVICE static float from(From x) {
    return dg_round_to_bf16(static_cast<float>(dg_widen(x)));
  }
};
template <class Storage, class Compute, class From>
DG_DEVICE Compute dg_round(From x) {
  return dg_rounded<Storage, Compute>::from(x);
}

// ---- math, overloaded for float and double ----------------------------------------------------
DG_DEVICE float dg_exp(float x) { return expf(x); }
DG_DEVICE double dg_exp(double x) { return exp(x); }
DG_DEVICE float dg_log(float x) { return logf(x); }
DG_DEVICE double dg_log(double x) { return log(x); }
DG_DEVICE float dg_sqrt(float x) { return sqrtf(x); }
DG_DEVICE double dg_sqrt(double x) { return sqrt(x); }
DG_DEVICE float dg_rsqrt(float x) { return 1.0f / sqrtf(x); }
DG_DEVICE double dg_rsqrt(double x) { return 1.0 / sqrt(x); }
DG_DEVICE float dg_tanh(float x) { return tanhf(x); }
DG_DEVICE double dg_tanh(double x) { return tanh(x); }
DG_DEVICE float dg_pow(float x, float y) { return powf(x, y); }
DG_DEVICE double dg_pow(double x, double y) { return pow(x, y); }
DG_DEVICE float dg_erf(float x) { return erff(x); }
DG_DEVICE double dg_erf(double x) { return erf(x); }
DG_DEVICE float dg_sin(float x) { return sinf(x); }
DG_DEVICE double dg_sin(double x) { return sin(x); }
DG_DEVICE float dg_cos(float x) { return cosf(x); }
DG_DEVICE double dg_cos(double x) { return cos(x); }

template <class T>
DG_DEVICE T dg_abs(T x) {
  return x < T(0) ? -x : x;
}
template <class T>
DG_DEVICE T dg_reciprocal(T x) {
  return T(1) / x;
}
template <class T>
DG_DEVICE T dg_relu(T x) {
  return x < T(0) ? T(0) : x;
}  // NaN stays NaN
// Note [Sigmoid on the special-function unit]
// In f32, sigmoid (and silu and their gradients, which call it) runs on the SFU's approximate
// exp2 and reciprocal, as Inductor's Triton kernels do (tl.exp and tl.sigmoid lower to
// ex2.approx): written as x / (1 + expf(-x)), each element took about 20 instructions in the
// GEMM epilogues' SASS (expf's range reduction, the IEEE division's check and its out-of-line slow
// path; Phi-3.5-MoE's gate/up epilogue spent a third of its 3,060 instructions per warp there),
// against 6 here. Both approximations stay in their accurate range: e = 2^(-|x| log2 e) is in
// (0, 1] and 1 + e in [1, 2], so r = 1 / (1 + e) is within 2 ulp (PTX ISA, ex2.approx and
// rcp.approx), and sigmoid = r for x >= 0, e r below. Against the IEEE formula the relative
// difference is about |x| 2^-24 + 2^-22: below half a bf16 ulp, so a bf16 result differs by at
// most its last bit where the exact value lies near a rounding boundary. NaN stays NaN, +-inf
// give 1 and 0. Results below 2^-126 flush to zero (.ftz). f64 keeps the exact formula.
DG_DEVICE float dg_sigmoid_f32(float x) {
  const float t = -fabsf(x) * 1.4426950408889634f;  // -|x| log2(e)
  float e, r;
#if defined(DG_ON_GPU)
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(t));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
#else
  e = exp2f(t);
  r = 1.0f / (1.0f + e);
#endif
  return (x >= 0.0f ? 1.0f : e) * r;
}
template <class T>
DG_DEVICE T dg_sigmoid(T x) {
  return T(1) / (T(1) + dg_exp(-x));
}
template <>
DG_DEVICE float dg_sigmoid<float>(float x) {
  return dg_sigmoid_f32(x);
}
template <class T>
DG_DEVICE T dg_silu(T x) {
  return x / (T(1) + dg_exp(-x));
}
template <>
DG_DEVICE float dg_silu<float>(float x) {
  return x * dg_sigmoid_f32(x);
}
template <class T>
DG_DEVICE T dg_gelu(T x) {
  return T(0.5) * x * (T(1) + dg_erf(x * T(0.70710678118654752440)));
}
// sinc(x) = sin(pi x) / (pi x), 1 at 0 (torch.sinc).
template <class T>
DG_DEVICE T dg_sinc(T x) {
  if (x == T(0)) return T(1);
  T px = x * T(3.14159265358979323846);
  return dg_sin(px) / px;
}
// The tanh approximation of gelu and the gradients of both forms, in PyTorch's formulation.
template <class T>
DG_DEVICE T dg_gelu_tanh(T x) {
  const T beta = T(0.79788456080286535588), kappa = T(0.044715);
  return T(0.5) * x * (T(1) + dg_tanh(beta * (x + kappa * x * x * x)));
}
template <class T>
DG_DEVICE T dg_gelu_backward(T grad, T x) {
  const T alpha = T(0.70710678118654752440), beta = T(0.39894228040143267794);
  T cdf = T(0.5) * (T(1) + dg_erf(x * alpha));
  T pdf = beta * dg_exp(T(-0.5) * x * x);
  return grad * (cdf + x * pdf);
}
template <class T>
DG_DEVICE T dg_gelu_tanh_backward(T grad, T x) {
  const T beta = T(0.79788456080286535588), kappa = T(0.044715);
  T x_sq = x * x;
  T t = dg_tanh(beta * (x + kappa * x_sq * x));
  T left = T(0.5) * x, right = T(1) + t;
  T inner_derivative = beta * (T(1) + T(3) * kappa * x_sq);
  return grad * (T(0.5) * right + left * (T(1) - t * t) * inner_derivative);
}
template <class T>
DG_DEVICE T dg_silu_backward(T grad, T x) {
  T s = dg_sigmoid(x);
  return grad * s * (T(1) + x * (T(1) - s));
}
template <class T>
DG_DEVICE T dg_sigmoid_backward(T grad, T y) {
  return grad * (T(1) - y) * y;
}
// maximum/minimum propagate NaN like torch.maximum.
template <class T>
DG_DEVICE T dg_maximum(T a, T b) {
  return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
}
template <class T>
DG_DEVICE T dg_minimum(T a, T b) {
  return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));
}

template <class T>
DG_DEVICE T dg_lowest();
template <>
DG_DEVICE float dg_lowest<float>() {
  return -__int_as_float(0x7f800000);
}
template <>
DG_DEVICE double dg_lowest<double>() {
  return -(1.0 / 0.0);
}
template <>
DG_DEVICE long long dg_lowest<long long>() {
  return -9223372036854775807LL - 1;
}

// ---- atomics ----------------------------------------------------------------------------------
DG_DEVICE void dg_atomic_accumulate(float* p, float v) { atomicAdd(p, v); }
