// Reference for the grouped-experts ops (Note [Grouped experts ops]): routing by expert and the
// GEMMs over per-expert row segments. An expert index outside [0, E) and offsets that are not a
// non-decreasing sequence within [0, R] are errors, never clamped values.
#include <algorithm>

#include "runtime/reference/ref_ops.h"

namespace dg::ref {
namespace {

int64_t num_experts_of(const OpArgs& a) { return a.node.attrs.get_int("num_experts").value_or(0); }

// Reads top_k_index (any shape) as expert ids, each checked against [0, E).
std::string read_experts(const HostTensor& idx, int64_t experts, std::vector<int64_t>* out) {
  if (idx.dtype != DType::kI64 && idx.dtype != DType::kI32)
    return "top_k_index must be i64 or i32, got " + idx.to_string();
  out->resize(static_cast<size_t>(idx.numel()));
  for (int64_t p = 0; p < idx.numel(); ++p) {
    const int64_t e = idx.get_int(p);
    if (e < 0 || e >= experts)
      return "expert index " + std::to_string(e) + " at position " + std::to_string(p) +
             " is out of range for " + std::to_string(experts) + " experts";
    (*out)[static_cast<size_t>(p)] = e;
  }
  return "";
}

std::string eval_routing(const OpArgs& a) {
  const int64_t experts = num_experts_of(a);
  std::vector<int64_t> ids;
  if (auto e = read_experts(*a.in[0], experts, &ids); !e.empty()) return e;
  std::vector<int64_t> counts(static_cast<size_t>(experts), 0);
  for (int64_t id : ids) ++counts[static_cast<size_t>(id)];
  if (a.node.op == OpKind::kExpertOffsets) {
    int64_t running = 0;
    for (int64_t e = 0; e < experts; ++e) {
      running += counts[static_cast<size_t>(e)];
      a.out->set_int(e, running);
    }
    return "";
  }
  std::vector<int64_t> next(static_cast<size_t>(experts), 0);  // exclusive offsets
  for (int64_t e = 1; e < experts; ++e)
    next[static_cast<size_t>(e)] =
        next[static_cast<size_t>(e - 1)] + counts[static_cast<size_t>(e - 1)];
  for (size_t p = 0; p < ids.size(); ++p)
    a.out->set_int(next[static_cast<size_t>(ids[p])]++, static_cast<int64_t>(p));
  return "";
}

// Segment bounds [begin[e], end[e]) from inclusive offsets; an error unless they are
// non-decreasing and within [0, rows].
std::string read_segments(const HostTensor& offs, int64_t rows, std::vector<int64_t>* begin,
                          std::vector<int64_t>* end) {
  const int64_t experts = offs.numel();
  begin->assign(static_cast<size_t>(experts), 0);
  end->assign(static_cast<size_t>(experts), 0);
  int64_t prev = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t o = offs.get_int(e);
    if (o < prev || o > rows)
      return "offs[" + std::to_string(e) + "] = " + std::to_string(o) +
             " is not a non-decreasing offset within [0, " + std::to_string(rows) + "]";
    (*begin)[static_cast<size_t>(e)] = prev;
    (*end)[static_cast<size_t>(e)] = o;
    prev = o;
  }
  return "";
}

template <class T>
std::string grouped_mm(const OpArgs& a) {
  const HostTensor& x = *a.in[0];
  const int64_t rows = x.shape[0], k_dim = x.shape[1], n_dim = a.out->shape[1];
  std::vector<int64_t> begin, end;
  if (auto e = read_segments(*a.in[1], rows, &begin, &end); !e.empty()) return e;
  const bool nk = a.node.attrs.get_int("w_layout").value_or(0) == 0;
  const bool fused = a.in.size() == 3;
  const std::vector<T> xs = to_compute<T>(x);
  for (size_t e = 0; e < begin.size(); ++e) {
    const std::vector<T> ws = to_compute<T>(*a.in[fused ? 2 : 2 + e]);
    const T* w = ws.data() + (fused ? static_cast<int64_t>(e) * n_dim * k_dim : 0);
    for (int64_t r = begin[e]; r < end[e]; ++r)
      for (int64_t n = 0; n < n_dim; ++n) {
        T acc = 0;
        for (int64_t k = 0; k < k_dim; ++k)
          acc +=
              xs[static_cast<size_t>(r * k_dim + k)] * (nk ? w[n * k_dim + k] : w[k * n_dim + n]);
        store_element<T>(*a.out, r * n_dim + n, acc);
      }
  }
  return "";  // rows past the last offset stay zero
}

template <class T>
std::string grouped_mm_wgrad(const OpArgs& a) {
  const HostTensor &dy = *a.in[0], &x = *a.in[1];
  const int64_t rows = dy.shape[0], n_dim = dy.shape[1], k_dim = x.shape[1];
  std::vector<int64_t> begin, end;
  if (auto e = read_segments(*a.in[2], rows, &begin, &end); !e.empty()) return e;
  const std::vector<T> gs = to_compute<T>(dy), xs = to_compute<T>(x);
  for (size_t e = 0; e < begin.size(); ++e)
    for (int64_t n = 0; n < n_dim; ++n)
      for (int64_t k = 0; k < k_dim; ++k) {
        T acc = 0;
        for (int64_t r = begin[e]; r < end[e]; ++r)
          acc += gs[static_cast<size_t>(r * n_dim + n)] * xs[static_cast<size_t>(r * k_dim + k)];
        store_element<T>(*a.out, (static_cast<int64_t>(e) * n_dim + n) * k_dim + k, acc);
      }
  return "";
}

}  // namespace

std::string eval_grouped(const OpArgs& a) {
  switch (a.node.op) {
    case OpKind::kExpertOffsets:
    case OpKind::kExpertOrder:
      return eval_routing(a);
    case OpKind::kGroupedMm:
      return compute_of(a.out->dtype) == Compute::kDouble ? grouped_mm<double>(a)
                                                          : grouped_mm<float>(a);
    case OpKind::kGroupedMmWgrad:
      return compute_of(a.out->dtype) == Compute::kDouble ? grouped_mm_wgrad<double>(a)
                                                          : grouped_mm_wgrad<float>(a);
    default:
      return "not a grouped-experts op";
  }
}

}  // namespace dg::ref
