// Reference for data movement: reshape, permute, expand, slice and cat. Values are copied
// bit for bit; no op here changes a dtype.
#include <cstring>

#include "runtime/reference/ref_ops.h"

namespace dg::ref {
namespace {

// out[i] = in[offset(i)] for every element of out, with offsets from `strides` and `base`.
void gather(const HostTensor& in, HostTensor& out, const std::vector<int64_t>& strides,
            int64_t base) {
  const size_t es = static_cast<size_t>(dtype_size(out.dtype));
  for_each_index(out.shape, {strides}, {base}, [&](int64_t i, const int64_t* off) {
    std::memcpy(out.bytes.data() + static_cast<size_t>(i) * es,
                in.bytes.data() + static_cast<size_t>(off[0]) * es, es);
  });
}

std::string permute(const OpArgs& a) {
  const HostTensor& x = *a.in[0];
  auto dims = a.node.attrs.get_ints("dims");
  if (!dims || dims->size() != x.shape.size()) return "dims must list every axis";
  std::vector<int64_t> in_strides = contiguous_strides(x.shape), strides;
  std::vector<bool> seen(x.shape.size(), false);
  for (size_t i = 0; i < dims->size(); ++i) {
    int64_t axis = norm_axis((*dims)[i], x.rank());
    if (axis < 0 || seen[static_cast<size_t>(axis)]) return "dims is not a permutation";
    seen[static_cast<size_t>(axis)] = true;
    if (x.shape[static_cast<size_t>(axis)] != a.out->shape[i]) return "result shape mismatch";
    strides.push_back(in_strides[static_cast<size_t>(axis)]);
  }
  gather(x, *a.out, strides, 0);
  return "";
}

std::string slice(const OpArgs& a) {
  const HostTensor& x = *a.in[0];
  const Attrs& attrs = a.node.attrs;
  auto dim = attrs.get_int("dim");
  auto start_e = attrs.get_syms("start"), end_e = attrs.get_syms("end");
  int64_t step = attrs.get_int("step").value_or(1);
  if (!dim || !start_e || !end_e || start_e->size() != 1 || end_e->size() != 1 || step < 1)
    return "needs attributes dim, start, end (and a positive step)";
  int64_t axis = norm_axis(*dim, x.rank());
  if (axis < 0) return "dim out of range";
  std::vector<int64_t> start, end;
  std::string error;
  if (!eval_syms(*start_e, a.env, &start, &error) || !eval_syms(*end_e, a.env, &end, &error))
    return error;
  const size_t ax = static_cast<size_t>(axis);
  if (start[0] < 0 || start[0] > end[0] || end[0] > x.shape[ax])
    return "needs 0 <= start <= end <= size, got start " + std::to_string(start[0]) + ", end " +
           std::to_string(end[0]) + ", size " + std::to_string(x.shape[ax]);
  if (a.out->shape[ax] != (end[0] - start[0] + step - 1) / step) return "result shape mismatch";
  std::vector<int64_t> strides = contiguous_strides(x.shape);
  int64_t base = start[0] * strides[ax];
  strides[ax] *= step;
  gather(x, *a.out, strides, base);
  return "";
}

std::string cat(const OpArgs& a) {
  HostTensor& out = *a.out;
  auto dim = a.node.attrs.get_int("dim");
  if (!dim) return "missing attribute dim";
  int64_t axis = norm_axis(*dim, out.rank());
  if (axis < 0) return "dim out of range";
  const size_t ax = static_cast<size_t>(axis);
  const size_t es = static_cast<size_t>(dtype_size(out.dtype));
  std::vector<int64_t> out_strides = contiguous_strides(out.shape);
  int64_t at = 0;  // where along `axis` the next operand goes
  for (const HostTensor* t : a.in) {
    if (t->dtype != out.dtype || t->rank() != out.rank()) return "operands differ in type";
    for (size_t d = 0; d < out.shape.size(); ++d)
      if (d != ax && t->shape[d] != out.shape[d]) return "operands differ off the cat dim";
    if (at + t->shape[ax] > out.shape[ax]) return "result shape mismatch";
    for_each_index(t->shape, {out_strides}, {at * out_strides[ax]},
                   [&](int64_t i, const int64_t* off) {
                     std::memcpy(out.bytes.data() + static_cast<size_t>(off[0]) * es,
                                 t->bytes.data() + static_cast<size_t>(i) * es, es);
                   });
    at += t->shape[ax];
  }
  return at == out.shape[ax] ? "" : "result shape mismatch";
}

}  // namespace

std::string eval_layout(const OpArgs& a) {
  const HostTensor& x = *a.in[0];
  if (x.dtype != a.out->dtype) return "operand dtype differs from the result's";
  switch (a.node.op) {
    case OpKind::kReshape:
      if (x.numel() != a.out->numel())
        return "cannot reshape " + x.to_string() + " to " + a.out->to_string();
      a.out->bytes = x.bytes;
      return "";
    case OpKind::kPermute:
      return permute(a);
    case OpKind::kExpand: {
      std::vector<int64_t> strides;
      if (!broadcast_strides(x.shape, a.out->shape, &strides))
        return "cannot expand " + x.to_string() + " to " + a.out->to_string();
      gather(x, *a.out, strides, 0);
      return "";
    }
    case OpKind::kSlice:
      return slice(a);
    case OpKind::kCat:
      return cat(a);
    default:
      return "not a layout op";
  }
}

}  // namespace dg::ref
