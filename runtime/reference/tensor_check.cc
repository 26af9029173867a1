// random_tensor, default_tolerance and compare: the helpers tests use around the reference.
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "runtime/reference/host_tensor.h"

namespace dg {
namespace {

// SplitMix64: tiny, and the same sequence on every platform (std distributions are not).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1p-53; }
};

std::string index_string(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

}  // namespace

HostTensor random_tensor(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo,
                         double hi) {
  HostTensor t = make_tensor(dtype, std::move(shape));
  SplitMix64 rng{seed};
  int64_t n = t.numel();
  if (dtype_is_float(dtype)) {
    if (!(lo <= hi)) throw std::invalid_argument("random_tensor: need lo <= hi");
    for (int64_t i = 0; i < n; ++i) t.set(i, lo + (hi - lo) * rng.uniform01());
  } else if (dtype == DType::kBool) {
    for (int64_t i = 0; i < n; ++i) t.set_int(i, static_cast<int64_t>(rng.next() >> 63));
  } else {
    double first = std::ceil(lo), end = std::ceil(hi);
    if (!(first < end) || first < -0x1p62 || end > 0x1p62)
      throw std::invalid_argument("random_tensor: need an integer in [lo, hi)");
    int64_t base = static_cast<int64_t>(first);
    uint64_t count = static_cast<uint64_t>(static_cast<int64_t>(end) - base);
    for (int64_t i = 0; i < n; ++i) t.set_int(i, base + static_cast<int64_t>(rng.next() % count));
  }
  return t;
}

Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return {1.6e-2, 1e-2};
    case DType::kF16:
      return {2e-3, 1e-3};
    case DType::kF32:
      return {1e-4, 1e-5};
    case DType::kF64:
      return {1e-9, 1e-12};
    default:
      return {0, 0};
  }
}

CompareResult compare(const HostTensor& actual, const HostTensor& expected, Tolerance tol) {
  return compare(actual, expected, tol.rtol, tol.atol);
}

CompareResult compare(const HostTensor& actual, const HostTensor& expected, double rtol,
                      double atol) {
  CompareResult r;
  if (!actual.consistent() || !expected.consistent()) {
    r.message = "a tensor's byte count does not match its shape";
    return r;
  }
  if (actual.shape != expected.shape) {
    r.message = "shape " + actual.to_string() + " differs from expected " + expected.to_string();
    return r;
  }
  const bool exact_ints = !dtype_is_float(actual.dtype) && !dtype_is_float(expected.dtype);
  const double inf = std::numeric_limits<double>::infinity();
  double worst_ratio = -1;
  int64_t failures = 0, n = expected.numel();
  for (int64_t i = 0; i < n; ++i) {
    double a = actual.get(i), e = expected.get(i), diff;
    if (exact_ints) {
      int64_t ai = actual.get_int(i), ei = expected.get_int(i);
      diff = ai == ei ? 0.0 : std::fabs(static_cast<double>(ai) - static_cast<double>(ei));
      if (ai != ei && diff == 0) diff = 1;  // differ beyond double precision
    } else if (std::isnan(a) || std::isnan(e)) {
      diff = std::isnan(a) && std::isnan(e) ? 0.0 : inf;
    } else if (std::isinf(a) || std::isinf(e)) {
      diff = a == e ? 0.0 : inf;
    } else {
      diff = std::fabs(a - e);
    }
    // Non-finite expectations must match exactly (diff is then 0 or infinite).
    double allowed = exact_ints || !std::isfinite(e) ? 0.0 : atol + rtol * std::fabs(e);
    double ratio = diff == 0 ? 0.0 : (allowed > 0 ? diff / allowed : inf);
    if (diff > allowed) ++failures;
    if (diff > r.max_abs_err) r.max_abs_err = diff;
    if (e != 0 && !std::isinf(e) && !std::isnan(e) && diff / std::fabs(e) > r.max_rel_err)
      r.max_rel_err = diff / std::fabs(e);
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      r.worst_index = i;
    }
  }
  r.ok = failures == 0;
  if (!r.ok) {
    std::ostringstream os;
    os.precision(9);
    os << failures << " of " << n << " elements outside rtol " << rtol << " atol " << atol
       << "; worst at " << index_string(expected.shape, r.worst_index) << ": actual "
       << actual.get(r.worst_index) << ", expected " << expected.get(r.worst_index);
    r.message = os.str();
  }
  return r;
}

}  // namespace dg
