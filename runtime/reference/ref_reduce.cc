// Reference for reductions over a set of dims: sum, mean and amax (Note [Reference semantics]);
// cumsum, and topk along the last dim.
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/reference/ref_ops.h"

namespace dg::ref {
namespace {

// Pairwise summation: error growth O(log n) like PyTorch's cascade sum and a GPU's tree, rather
// than O(n) of a running sum, so the reference does not lose to the kernels it checks.
template <class T>
T pairwise_sum(const T* v, size_t n) {
  if (n <= 8) {
    T s = 0;
    for (size_t i = 0; i < n; ++i) s += v[i];
    return s;
  }
  size_t half = n / 2;
  return pairwise_sum(v, half) + pairwise_sum(v + half, n - half);
}

template <>
int64_t pairwise_sum<int64_t>(const int64_t* v, size_t n) {
  uint64_t s = 0;  // wraps, like integer sums in PyTorch
  for (size_t i = 0; i < n; ++i) s += static_cast<uint64_t>(v[i]);
  return static_cast<int64_t>(s);
}

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

template <class T>
std::string reduce(const OpArgs& a, const std::vector<bool>& reduced) {
  const HostTensor& x = *a.in[0];
  HostTensor& out = *a.out;
  const OpKind op = a.node.op;
  std::vector<int64_t> strides = contiguous_strides(x.shape);
  std::vector<int64_t> kept_shape, kept_strides, red_shape, red_strides;
  for (int d = 0; d < x.rank(); ++d) {
    (reduced[d] ? red_shape : kept_shape).push_back(x.shape[d]);
    (reduced[d] ? red_strides : kept_strides).push_back(strides[d]);
  }
  int64_t kept = 1, count = 1;
  for (int64_t d : kept_shape) kept *= d;
  for (int64_t d : red_shape) count *= d;
  if (kept != out.numel()) return "result shape mismatch";
  if (op == OpKind::kAmax && count == 0 && kept > 0)
    return "amax over an empty dimension of " + x.to_string() + " has no identity";

  std::vector<int64_t> red_offsets;
  red_offsets.reserve(static_cast<size_t>(count));
  for_each_index(red_shape, {red_strides}, {},
                 [&](int64_t, const int64_t* off) { red_offsets.push_back(off[0]); });
  // An explicit dtype converts the input first (torch.sum(x, dtype=...)).
  const bool convert = x.dtype != out.dtype;
  std::vector<T> vals(static_cast<size_t>(count));
  for_each_index(kept_shape, {kept_strides}, {}, [&](int64_t o, const int64_t* base) {
    for (size_t j = 0; j < vals.size(); ++j) {
      T v = load_element<T>(x, base[0] + red_offsets[j]);
      vals[j] = convert ? round_to_dtype<T>(out.dtype, v) : v;
    }
    T r;
    if (op == OpKind::kAmax) {
      r = vals[0];
      for (T v : vals)
        if (is_nan(v) || (!is_nan(r) && v > r)) r = v;
    } else {
      r = pairwise_sum(vals.data(), vals.size());
      if (op == OpKind::kMean) r = r / static_cast<T>(count);
    }
    store_element<T>(out, o, r);
  });
  return "";
}

// A running sum along one axis in the compute type, rounded to the result dtype at every element
// (PyTorch's cumsum on the CPU).
template <class T>
std::string cumsum(const OpArgs& a, int64_t axis) {
  const HostTensor& x = *a.in[0];
  HostTensor& out = *a.out;
  if (out.shape != x.shape) return "result shape mismatch";
  std::vector<int64_t> lines = x.shape, strides = contiguous_strides(x.shape);
  int64_t len = 1, step = 1;
  if (!lines.empty()) {
    len = lines[static_cast<size_t>(axis)];
    step = strides[static_cast<size_t>(axis)];
    lines[static_cast<size_t>(axis)] = 1;
  }
  for_each_index(lines, {strides}, {}, [&](int64_t, const int64_t* base) {
    T acc = 0;
    for (int64_t r = 0; r < len; ++r) {
      T v = load_element<T>(x, base[0] + r * step);
      if constexpr (std::is_same_v<T, int64_t>)
        acc = static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v));
      else
        acc += v;
      store_element<T>(out, base[0] + r * step, acc);
    }
  });
  return "";
}

// The positions of the k best of each row along the last dim, best first (Note [Top-k op]): a
// stable sort of the positions by "NaN, then larger", so equal values keep their order.
template <class T>
std::string topk(const OpArgs& a) {
  const HostTensor& x = *a.in[0];
  HostTensor& out = *a.out;
  const int64_t k = a.node.attrs.get_int("k").value_or(0);
  if (x.rank() < 1 || out.shape.empty() || out.shape.back() != k) return "result shape mismatch";
  const int64_t len = x.shape.back();
  if (k < 1 || k > len) return "k = " + std::to_string(k) + " for rows of " + std::to_string(len);
  const int64_t rows = len == 0 ? 0 : x.numel() / len;
  std::vector<T> row(static_cast<size_t>(len));
  std::vector<int64_t> order(static_cast<size_t>(len));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < len; ++j) {
      row[static_cast<size_t>(j)] = load_element<T>(x, r * len + j);
      order[static_cast<size_t>(j)] = j;
    }
    std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
      const T u = row[static_cast<size_t>(i)], v = row[static_cast<size_t>(j)];
      return is_nan(u) ? !is_nan(v) : (!is_nan(v) && u > v);
    });
    for (int64_t s = 0; s < k; ++s) out.set_int(r * k + s, order[static_cast<size_t>(s)]);
  }
  return "";
}

}  // namespace

std::string eval_reduce(const OpArgs& a) {
  const HostTensor& x = *a.in[0];
  if (a.node.op == OpKind::kTopk) {
    switch (compute_of(x.dtype)) {
      case Compute::kFloat:
        return topk<float>(a);
      case Compute::kDouble:
        return topk<double>(a);
      case Compute::kInt:
        return topk<int64_t>(a);
    }
  }
  if (a.node.op == OpKind::kCumsum) {
    int64_t axis =
        norm_axis(a.node.attrs.get_int("dim").value_or(0), std::max<int64_t>(x.rank(), 1));
    if (axis < 0) return "bad dim for " + x.to_string();
    switch (compute_of(a.out->dtype)) {
      case Compute::kFloat:
        return cumsum<float>(a, axis);
      case Compute::kDouble:
        return cumsum<double>(a, axis);
      case Compute::kInt:
        return cumsum<int64_t>(a, axis);
    }
  }
  auto dims = a.node.attrs.get_ints("dims");
  if (!dims) return "missing attribute dims";
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  for (int64_t d : *dims) {
    int64_t axis = norm_axis(d, x.rank());
    if (axis < 0 || reduced[static_cast<size_t>(axis)])
      return "bad dim " + std::to_string(d) + " for " + x.to_string();
    reduced[static_cast<size_t>(axis)] = true;
  }
  switch (compute_of(a.out->dtype)) {
    case Compute::kFloat:
      return reduce<float>(a, reduced);
    case Compute::kDouble:
      return reduce<double>(a, reduced);
    case Compute::kInt:
      if (a.node.op == OpKind::kMean) return "mean needs a floating-point dtype";
      return reduce<int64_t>(a, reduced);
  }
  return "";
}

}  // namespace dg::ref
