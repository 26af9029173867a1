// Reference for the index ops: along one dim by a 1-D index tensor (index_select, index_add,
// index_copy), and per element (gather, scatter).
#include <cmath>
#include <cstring>

#include "runtime/reference/ref_ops.h"

namespace dg::ref {
namespace {

// x viewed as [outer, size, inner] around the indexed dim.
struct Split {
  int64_t outer = 1, size = 0, inner = 1;
};

Split split_at(const std::vector<int64_t>& shape, size_t axis) {
  Split s;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d < axis)
      s.outer *= shape[d];
    else if (d == axis)
      s.size = shape[d];
    else
      s.inner *= shape[d];
  }
  return s;
}

// Reads the index tensor; a negative index wraps once, anything still outside [0, size) is an
// error (Note [Reference semantics]).
std::string read_indices(const HostTensor& idx, int64_t size, std::vector<int64_t>* out) {
  if ((idx.dtype != DType::kI64 && idx.dtype != DType::kI32) || idx.rank() != 1)
    return "index must be a 1-D integer tensor, got " + idx.to_string();
  out->resize(static_cast<size_t>(idx.numel()));
  for (int64_t p = 0; p < idx.numel(); ++p) {
    int64_t i = idx.get_int(p);
    int64_t wrapped = i < 0 ? i + size : i;
    if (wrapped < 0 || wrapped >= size)
      return "index " + std::to_string(i) + " at position " + std::to_string(p) +
             " is out of range for a dim of size " + std::to_string(size);
    (*out)[static_cast<size_t>(p)] = wrapped;
  }
  return "";
}

template <class T>
void index_add(const OpArgs& a, const Split& s, const std::vector<int64_t>& idx) {
  const HostTensor &x = *a.in[0], &src = *a.in[2];
  HostTensor& out = *a.out;
  double alpha_attr = a.node.attrs.get_float("alpha").value_or(1.0);
  T alpha;
  if constexpr (std::is_same_v<T, int64_t>)
    alpha = static_cast<int64_t>(std::trunc(alpha_attr));
  else
    alpha = static_cast<T>(alpha_attr);
  const int64_t n = static_cast<int64_t>(idx.size());
  std::vector<T> acc(static_cast<size_t>(x.numel()));
  for (size_t i = 0; i < acc.size(); ++i) acc[i] = load_element<T>(x, static_cast<int64_t>(i));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t p = 0; p < n; ++p) {
      const int64_t to = (o * s.size + idx[static_cast<size_t>(p)]) * s.inner;
      const int64_t from = (o * n + p) * s.inner;
      for (int64_t k = 0; k < s.inner; ++k) {
        T v = load_element<T>(src, from + k);
        T& dst = acc[static_cast<size_t>(to + k)];
        if constexpr (std::is_same_v<T, int64_t>) {
          dst = static_cast<int64_t>(static_cast<uint64_t>(dst) +
                                     static_cast<uint64_t>(alpha) * static_cast<uint64_t>(v));
        } else {
          dst += alpha * v;
        }
      }
    }
  }
  for (size_t i = 0; i < acc.size(); ++i) store_element<T>(out, static_cast<int64_t>(i), acc[i]);
}

// gather / scatter: idx has x's rank; each idx element names the position along `axis`.
std::string eval_per_element(const OpArgs& a, int64_t axis) {
  const HostTensor &x = *a.in[0], &idx = *a.in[1];
  HostTensor& out = *a.out;
  if ((idx.dtype != DType::kI64 && idx.dtype != DType::kI32) || idx.rank() != x.rank())
    return "index must be an integer tensor of x's rank, got " + idx.to_string();
  for (int d = 0; d < x.rank(); ++d)
    if (d != axis && idx.shape[d] > x.shape[d])
      return "index dim " + std::to_string(d) + " too large";
  const bool is_gather = a.node.op == OpKind::kGather;
  if (is_gather ? out.shape != idx.shape : out.shape != x.shape) return "result shape mismatch";
  if (!is_gather && a.in[2]->shape != idx.shape) return "source must be shaped like the index";
  const size_t es = static_cast<size_t>(dtype_size(x.dtype));
  if (!is_gather) std::memcpy(out.bytes.data(), x.bytes.data(), out.bytes.size());
  const std::vector<int64_t> xs = contiguous_strides(x.shape);
  std::string error;
  for_each_index(idx.shape, {contiguous_strides(idx.shape)}, {}, [&](int64_t p, const int64_t*) {
    if (!error.empty()) return;
    int64_t rest = p, x_off = 0, ix = idx.get_int(p);
    int64_t size = x.shape[static_cast<size_t>(axis)], wrapped = ix < 0 ? ix + size : ix;
    if (wrapped < 0 || wrapped >= size) {
      error = "index " + std::to_string(ix) + " is out of range for a dim of size " +
              std::to_string(size);
      return;
    }
    for (int d = x.rank(); d-- > 0;) {
      int64_t i = rest % idx.shape[static_cast<size_t>(d)];
      rest /= idx.shape[static_cast<size_t>(d)];
      x_off += (d == axis ? wrapped : i) * xs[static_cast<size_t>(d)];
    }
    if (is_gather)
      std::memcpy(out.bytes.data() + static_cast<size_t>(p) * es,
                  x.bytes.data() + static_cast<size_t>(x_off) * es, es);
    else
      std::memcpy(out.bytes.data() + static_cast<size_t>(x_off) * es,
                  a.in[2]->bytes.data() + static_cast<size_t>(p) * es, es);
  });
  return error;
}

// index_copy: x with the slices at idx along the axis replaced by src's; with repeated indices
// the last one wins (PyTorch leaves it unspecified).
void index_copy(const OpArgs& a, const Split& s, const std::vector<int64_t>& idx) {
  const HostTensor &x = *a.in[0], &src = *a.in[2];
  HostTensor& out = *a.out;
  std::memcpy(out.bytes.data(), x.bytes.data(), out.bytes.size());
  const size_t row = static_cast<size_t>(s.inner * dtype_size(x.dtype));
  const int64_t n = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t p = 0; p < n; ++p)
      std::memcpy(
          out.bytes.data() + static_cast<size_t>(o * s.size + idx[static_cast<size_t>(p)]) * row,
          src.bytes.data() + static_cast<size_t>(o * n + p) * row, row);
}

}  // namespace

std::string eval_index(const OpArgs& a) {
  const HostTensor& x = *a.in[0];
  HostTensor& out = *a.out;
  auto dim = a.node.attrs.get_int("dim");
  if (!dim) return "missing attribute dim";
  int64_t axis = norm_axis(*dim, x.rank());
  if (axis < 0) return "dim out of range";
  if (x.dtype != out.dtype) return "operand dtype differs from the result's";
  if (a.node.op == OpKind::kGather || a.node.op == OpKind::kScatter)
    return eval_per_element(a, axis);
  const Split s = split_at(x.shape, static_cast<size_t>(axis));
  std::vector<int64_t> idx;
  if (std::string e = read_indices(*a.in[1], s.size, &idx); !e.empty()) return e;
  std::vector<int64_t> picked = x.shape;
  picked[static_cast<size_t>(axis)] = static_cast<int64_t>(idx.size());

  if (a.node.op == OpKind::kIndexSelect) {
    if (out.shape != picked) return "result shape mismatch";
    const size_t es = static_cast<size_t>(dtype_size(x.dtype));
    const size_t row = static_cast<size_t>(s.inner) * es;
    const int64_t n = static_cast<int64_t>(idx.size());
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t p = 0; p < n; ++p)
        std::memcpy(
            out.bytes.data() + static_cast<size_t>(o * n + p) * row,
            x.bytes.data() + static_cast<size_t>(o * s.size + idx[static_cast<size_t>(p)]) * row,
            row);
    return "";
  }
  const HostTensor& src = *a.in[2];
  if (src.dtype != x.dtype || src.shape != picked)
    return "source must be " + HostTensor{x.dtype, picked, {}}.to_string() + ", got " +
           src.to_string();
  if (out.shape != x.shape) return "result shape mismatch";
  if (a.node.op == OpKind::kIndexCopy) {
    index_copy(a, s, idx);
    return "";
  }
  switch (compute_of(x.dtype)) {
    case Compute::kFloat:
      index_add<float>(a, s, idx);
      break;
    case Compute::kDouble:
      index_add<double>(a, s, idx);
      break;
    case Compute::kInt:
      index_add<int64_t>(a, s, idx);
      break;
  }
  return "";
}

}  // namespace dg::ref
