// Reference for contractions: linear (x @ w^T + b) and batched matmul with broadcast batch dims.
// Both accumulate over K in order in the compute type and round once (Note [Reference semantics]).
#include <algorithm>

#include "runtime/reference/ref_ops.h"

namespace dg::ref {
namespace {

template <class T>
std::string linear(const OpArgs& a) {
  const HostTensor &x = *a.in[0], &w = *a.in[1];
  HostTensor& out = *a.out;
  if (x.rank() < 1 || w.rank() != 2 || x.shape.back() != w.shape[1])
    return "expects x[..., K] and w[N, K], got " + x.to_string() + " and " + w.to_string();
  const int64_t k_dim = w.shape[1], n_dim = w.shape[0];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.rank(); ++d) rows *= x.shape[d];
  if (out.shape.back() != n_dim || rows * n_dim != out.numel()) return "result shape mismatch";
  std::vector<T> xs = to_compute<T>(x), ws = to_compute<T>(w), bias;
  if (a.in.size() == 3) {
    if (a.in[2]->shape != std::vector<int64_t>{n_dim}) return "bias must have shape [N]";
    bias = to_compute<T>(*a.in[2]);
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t n = 0; n < n_dim; ++n) {
      const T* xr = xs.data() + r * k_dim;
      const T* wn = ws.data() + n * k_dim;
      T acc = 0;
      for (int64_t k = 0; k < k_dim; ++k) acc += xr[k] * wn[k];
      if (!bias.empty()) acc += bias[static_cast<size_t>(n)];
      store_element<T>(out, r * n_dim + n, acc);
    }
  }
  return "";
}

template <class T>
std::string matmul(const OpArgs& a) {
  const HostTensor &x = *a.in[0], &y = *a.in[1];
  HostTensor& out = *a.out;
  if (x.rank() < 2 || y.rank() < 2 || out.rank() < 2 || x.shape.back() != y.shape[y.rank() - 2])
    return "expects a[..., M, K] and b[..., K, N], got " + x.to_string() + " and " + y.to_string();
  const int64_t m_dim = x.shape[x.rank() - 2], k_dim = x.shape.back(), n_dim = y.shape.back();
  if (out.shape[out.rank() - 2] != m_dim || out.shape.back() != n_dim)
    return "result shape mismatch";
  std::vector<int64_t> batch(out.shape.begin(), out.shape.end() - 2);
  std::vector<int64_t> batch_x(x.shape.begin(), x.shape.end() - 2);
  std::vector<int64_t> batch_y(y.shape.begin(), y.shape.end() - 2);
  std::vector<std::vector<int64_t>> strides(2);
  if (!broadcast_strides(batch_x, batch, &strides[0]) ||
      !broadcast_strides(batch_y, batch, &strides[1]))
    return "batch dims of " + x.to_string() + " and " + y.to_string() + " do not broadcast";
  for (int64_t& s : strides[0]) s *= m_dim * k_dim;  // in elements, not matrices
  for (int64_t& s : strides[1]) s *= k_dim * n_dim;
  std::vector<T> xs = to_compute<T>(x), ys = to_compute<T>(y), acc(static_cast<size_t>(n_dim));
  for_each_index(batch, strides, {}, [&](int64_t b, const int64_t* off) {
    for (int64_t m = 0; m < m_dim; ++m) {
      std::fill(acc.begin(), acc.end(), T(0));
      const T* xr = xs.data() + off[0] + m * k_dim;
      for (int64_t k = 0; k < k_dim; ++k) {  // each acc[n] still sums over k in order
        const T* yk = ys.data() + off[1] + k * n_dim;
        for (int64_t n = 0; n < n_dim; ++n) acc[static_cast<size_t>(n)] += xr[k] * yk[n];
      }
      for (int64_t n = 0; n < n_dim; ++n)
        store_element<T>(out, (b * m_dim + m) * n_dim + n, acc[static_cast<size_t>(n)]);
    }
  });
  return "";
}

}  // namespace

std::string eval_matmul(const OpArgs& a) {
  if (a.in[0]->dtype != a.in[1]->dtype || a.in[0]->dtype != a.out->dtype)
    return "operand dtypes differ";
  bool is_linear = a.node.op == OpKind::kLinear;
  switch (compute_of(a.out->dtype)) {
    case Compute::kFloat:
      return is_linear ? linear<float>(a) : matmul<float>(a);
    case Compute::kDouble:
      return is_linear ? linear<double>(a) : matmul<double>(a);
    case Compute::kInt:
      break;
  }
  return "needs floating-point operands";
}

}  // namespace dg::ref
