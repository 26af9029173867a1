// Host-side tensors for the reference evaluator and for checking kernels against it: dense,
// row-major, contiguous bytes in the tensor's dtype.
//
// Note [Element conversions]
// Elements are read and written through a compute type T (float, double or int64_t), the type an
// op computes in (see Note [Reference semantics] in reference_eval.h). The conversions are those
// of PyTorch's CPU kernels (c10::convert / static_cast), with two choices where C++ leaves a case
// undefined:
//   float types -> T: exact, except f64 -> float (round to nearest even).
//   int/bool    -> T: ints exact in int64_t, rounded to nearest in float/double; bool is 0 or 1.
//   T -> bf16/f16: through float (Note [16-bit rounding]), so double and int64 round twice.
//   T -> f32 / f64: one rounding.
//   float -> i32/i64: truncation toward zero; NaN and out-of-range values give the type's minimum
//     (what x86's cvtt* instructions, and so PyTorch on x86, produce).
//   int64 -> i32: two's-complement wrap. Anything -> bool: nonzero (NaN is true).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace dg {

struct HostTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // empty: a rank-0 tensor holding one element
  std::vector<uint8_t> bytes;  // numel() * dtype_size(dtype) bytes, row-major

  int rank() const { return static_cast<int>(shape.size()); }
  // Product of the dims; -1 if a dim is negative or the product overflows.
  int64_t numel() const;
  // True when bytes.size() matches the dtype and a valid shape.
  bool consistent() const;
  // Element `i` in row-major order as a double (exact for every float dtype and for integers up
  // to 2^53) and the reverse, with the rounding of Note [Element conversions].
  double get(int64_t i) const;
  void set(int64_t i, double value);
  // Exact integer access (for index tensors and integer results).
  int64_t get_int(int64_t i) const;
  void set_int(int64_t i, int64_t value);
  std::string to_string() const;  // e.g. "bf16[3, 4]"
};

// A zero-filled tensor; throws std::invalid_argument on a negative dim.
HostTensor make_tensor(DType dtype, std::vector<int64_t> shape);
// A tensor holding `values` (row-major, converted with set()); throws std::invalid_argument when
// the count does not match the shape.
HostTensor make_tensor(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values);
// The host form of a symbolic-integer graph input: i64, rank 0 (see reference_eval.h).
HostTensor make_sym_int(int64_t value);

// Typed element access in a compute type T in {float, double, int64_t}.
template <class T>
T load_element(const HostTensor& t, int64_t i);
template <class T>
void store_element(HostTensor& t, int64_t i, T value);
// `value` rounded to `dtype` and read back as T (e.g. what a bf16 buffer would hold).
template <class T>
T round_to_dtype(DType dtype, T value);

// Deterministic (for a seed, on every platform) random contents. Float dtypes: uniform in
// [lo, hi), then rounded to the dtype. Integer dtypes: uniform integers in [lo, hi) (use it for
// index tensors: lo = 0, hi = the indexed dim's size). bool: 0 or 1 with equal odds.
HostTensor random_tensor(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo = -1.0,
                         double hi = 1.0);

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// Note [Default tolerances]
// For comparing a kernel's result with the reference's result of the same dtype. An element
// passes when |actual - expected| <= atol + rtol * |expected| (torch.allclose's rule).
//   bf16: rtol 1.6e-2 (two units in the last place at 1.0: the 7-bit mantissa's ulp is 7.8e-3),
//         atol 1e-2 (cancellation in long f32 accumulations that are ordered differently).
//   f16:  rtol 2e-3, atol 1e-3 (the same reasoning with a 10-bit mantissa).
//   f32:  rtol 1e-4, atol 1e-5 (reordered f32 sums over K in the thousands, not bit equality).
//   f64:  rtol 1e-9, atol 1e-12. Integers and bool: exact.
Tolerance default_tolerance(DType dtype);

struct CompareResult {
  double max_abs_err = 0;    // over all elements, NaN-NaN pairs count as equal
  double max_rel_err = 0;    // |a - e| / |e| where e != 0
  int64_t worst_index = -1;  // element furthest outside (or closest to) its tolerance
  bool ok = false;
  std::string message;  // why not ok: a shape or dtype mismatch, or the worst element
};

// Compares element-wise; NaN matches NaN, an infinity only the same infinity. Tensors must have
// the same shape (dtypes may differ: values are compared as doubles).
CompareResult compare(const HostTensor& actual, const HostTensor& expected, double rtol,
                      double atol);
CompareResult compare(const HostTensor& actual, const HostTensor& expected, Tolerance tol);

}  // namespace dg
