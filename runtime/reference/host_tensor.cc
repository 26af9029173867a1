#include "runtime/reference/host_tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "runtime/reference/half_float.h"

namespace dg {
namespace {

template <class S>
S read_raw(const HostTensor& t, int64_t i) {
  S s;
  std::memcpy(&s, t.bytes.data() + static_cast<size_t>(i) * sizeof(S), sizeof(S));
  return s;
}

template <class S>
void write_raw(HostTensor& t, int64_t i, S s) {
  std::memcpy(t.bytes.data() + static_cast<size_t>(i) * sizeof(S), &s, sizeof(S));
}

// Float -> integer by truncation toward zero; NaN and out-of-range give the minimum (see
// Note [Element conversions]).
template <class I, class F>
I truncate_to(F v) {
  // [-2^(n-1), 2^(n-1)) is exactly representable at its ends in float and double.
  constexpr F lo = static_cast<F>(std::numeric_limits<I>::min());
  if (!(v >= lo && v < -lo)) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

// Stores a float or double into a float dtype.
template <class F>
void store_float(HostTensor& t, int64_t i, F v) {
  switch (t.dtype) {
    case DType::kBF16:
      write_raw<uint16_t>(t, i, float_to_bf16_bits(static_cast<float>(v)));
      break;
    case DType::kF16:
      write_raw<uint16_t>(t, i, float_to_f16_bits(static_cast<float>(v)));
      break;
    case DType::kF32:
      write_raw<float>(t, i, static_cast<float>(v));
      break;
    case DType::kF64:
      write_raw<double>(t, i, static_cast<double>(v));
      break;
    case DType::kI64:
      write_raw<int64_t>(t, i, truncate_to<int64_t>(v));
      break;
    case DType::kI32:
      write_raw<int32_t>(t, i, truncate_to<int32_t>(v));
      break;
    case DType::kBool:
      write_raw<uint8_t>(t, i, v != 0 ? 1 : 0);
      break;  // NaN != 0
  }
}

}  // namespace

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  return n;
}

bool HostTensor::consistent() const {
  int64_t n = numel();
  int64_t size = 0;
  if (n < 0 || __builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &size))
    return false;
  return bytes.size() == static_cast<uint64_t>(size);
}

template <>
double load_element<double>(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kBF16:
      return bf16_bits_to_float(read_raw<uint16_t>(t, i));
    case DType::kF16:
      return f16_bits_to_float(read_raw<uint16_t>(t, i));
    case DType::kF32:
      return read_raw<float>(t, i);
    case DType::kF64:
      return read_raw<double>(t, i);
    case DType::kI64:
      return static_cast<double>(read_raw<int64_t>(t, i));
    case DType::kI32:
      return read_raw<int32_t>(t, i);
    case DType::kBool:
      return read_raw<uint8_t>(t, i) != 0 ? 1.0 : 0.0;
  }
  return 0;
}

template <>
float load_element<float>(const HostTensor& t, int64_t i) {
  if (t.dtype == DType::kI64) return static_cast<float>(read_raw<int64_t>(t, i));
  if (t.dtype == DType::kI32) return static_cast<float>(read_raw<int32_t>(t, i));
  return static_cast<float>(load_element<double>(t, i));  // exact, or f64 rounded once
}

template <>
int64_t load_element<int64_t>(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kI64:
      return read_raw<int64_t>(t, i);
    case DType::kI32:
      return read_raw<int32_t>(t, i);
    case DType::kBool:
      return read_raw<uint8_t>(t, i) != 0 ? 1 : 0;
    default:
      return truncate_to<int64_t>(load_element<double>(t, i));
  }
}

template <>
void store_element<double>(HostTensor& t, int64_t i, double v) {
  store_float(t, i, v);
}

template <>
void store_element<float>(HostTensor& t, int64_t i, float v) {
  store_float(t, i, v);
}

template <>
void store_element<int64_t>(HostTensor& t, int64_t i, int64_t v) {
  switch (t.dtype) {
    case DType::kI64:
      write_raw<int64_t>(t, i, v);
      break;
    case DType::kI32:
      write_raw<int32_t>(t, i, static_cast<int32_t>(static_cast<uint32_t>(v)));
      break;
    case DType::kBool:
      write_raw<uint8_t>(t, i, v != 0 ? 1 : 0);
      break;
    case DType::kF64:
      write_raw<double>(t, i, static_cast<double>(v));
      break;
    default:
      store_float(t, i, static_cast<float>(v));
      break;  // int64 -> float -> 16-bit
  }
}

template <class T>
T round_to_dtype(DType dtype, T value) {
  HostTensor t{dtype, {}, std::vector<uint8_t>(static_cast<size_t>(dtype_size(dtype)))};
  store_element<T>(t, 0, value);
  return load_element<T>(t, 0);
}
template float round_to_dtype<float>(DType, float);
template double round_to_dtype<double>(DType, double);
template int64_t round_to_dtype<int64_t>(DType, int64_t);

double HostTensor::get(int64_t i) const { return load_element<double>(*this, i); }
void HostTensor::set(int64_t i, double value) { store_element<double>(*this, i, value); }
int64_t HostTensor::get_int(int64_t i) const { return load_element<int64_t>(*this, i); }
void HostTensor::set_int(int64_t i, int64_t value) { store_element<int64_t>(*this, i, value); }

std::string HostTensor::to_string() const {
  std::string s(dtype_name(dtype));
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

HostTensor make_tensor(DType dtype, std::vector<int64_t> shape) {
  HostTensor t{dtype, std::move(shape), {}};
  int64_t n = t.numel();
  if (n < 0) throw std::invalid_argument("make_tensor: bad shape " + t.to_string());
  t.bytes.assign(static_cast<size_t>(n) * static_cast<size_t>(dtype_size(dtype)), 0);
  return t;
}

HostTensor make_tensor(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor t = make_tensor(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw std::invalid_argument("make_tensor: " + std::to_string(values.size()) + " values for " +
                                t.to_string());
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

HostTensor make_sym_int(int64_t value) {
  HostTensor t = make_tensor(DType::kI64, {});
  t.set_int(0, value);
  return t;
}

}  // namespace dg
