#include "ir/shape_infer.h"

#include <algorithm>
#include <stdexcept>

#include "ir/shape_infer_grouped.h"

namespace dg {
namespace {

int category_rank(DType t) {
  if (t == DType::kBool) return 0;
  return dtype_is_float(t) ? 2 : 1;
}

int float_rank(DType t) {
  switch (t) {
    case DType::kF64:
      return 3;
    case DType::kF32:
      return 2;
    default:
      return 1;  // bf16, f16
  }
}

InferResult fail(OpKind kind, const std::string& msg) {
  return {{}, std::string(op_name(kind)) + ": " + msg};
}

// Normalizes a possibly negative axis; -1 when out of range.
int64_t norm_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return (axis < 0 || axis >= rank) ? -1 : axis;
}

InferResult infer_elementwise(const Graph& g, OpKind kind, const std::vector<ValueId>& in) {
  const OpInfo& info = op_info(kind);
  std::vector<SymExpr> shape = g.tensor(in[0]).shape;
  size_t first_data = info.category == OpCategory::kWhere ? 1 : 0;
  if (info.category == OpCategory::kWhere && g.tensor(in[0]).dtype != DType::kBool)
    return fail(kind,
                "condition must be bool, got " + std::string(dtype_name(g.tensor(in[0]).dtype)));
  for (size_t i = 1; i < in.size(); ++i)
    if (!broadcast_shapes(shape, g.tensor(in[i]).shape, &shape))
      return fail(kind, "shapes " + g.tensor(in[0]).to_string() + " and " +
                            g.tensor(in[i]).to_string() + " do not broadcast");
  DType dtype = g.tensor(in[first_data]).dtype;
  bool scalar = g.tensor(in[first_data]).rank() == 0;
  for (size_t i = first_data + 1; i < in.size(); ++i) {
    const TensorType& t = g.tensor(in[i]);
    dtype = promote_types(dtype, scalar, t.dtype, t.rank() == 0);
    scalar = scalar && t.rank() == 0;
  }
  if (info.category == OpCategory::kCompare) dtype = DType::kBool;
  if ((info.category == OpCategory::kUnary || info.category == OpCategory::kBinary) &&
      !dtype_is_float(dtype) && kind != OpKind::kNeg && kind != OpKind::kAbs &&
      kind != OpKind::kAdd && kind != OpKind::kSub && kind != OpKind::kMul &&
      kind != OpKind::kMaximum && kind != OpKind::kMinimum)
    return fail(kind, "needs a floating-point operand, got " + std::string(dtype_name(dtype)));
  return {{dtype, shape}, ""};
}

InferResult infer_matmul(const Graph& g, OpKind kind, const std::vector<ValueId>& in) {
  const TensorType& a = g.tensor(in[0]);
  const TensorType& b = g.tensor(in[1]);
  if (a.dtype != b.dtype)
    return fail(kind, "operand dtypes differ: " + a.to_string() + " and " + b.to_string());
  if (!dtype_is_float(a.dtype)) return fail(kind, "needs floating-point operands");
  if (kind == OpKind::kLinear) {
    // x[..., K] . w[N, K]^T (+ bias[N]) -> [..., N]
    if (a.rank() < 1 || b.rank() != 2) return fail(kind, "expects x[..., K] and w[N, K]");
    if (a.shape.back() != b.shape[1])
      return fail(kind, "inner dims differ: " + a.to_string() + " and " + b.to_string());
    if (in.size() == 3) {
      const TensorType& bias = g.tensor(in[2]);
      if (bias.dtype != a.dtype || bias.rank() != 1 || bias.shape[0] != b.shape[0])
        return fail(kind, "bias must be " + std::string(dtype_name(a.dtype)) + "[" +
                              b.shape[0].to_string() + "]");
    }
    std::vector<SymExpr> shape = a.shape;
    shape.back() = b.shape[0];
    return {{a.dtype, shape}, ""};
  }
  // matmul: a[..., M, K] . b[..., K, N] with broadcast batch dims.
  if (a.rank() < 2 || b.rank() < 2) return fail(kind, "expects operands of rank >= 2");
  if (a.shape[a.rank() - 1] != b.shape[b.rank() - 2])
    return fail(kind, "inner dims differ: " + a.to_string() + " and " + b.to_string());
  std::vector<SymExpr> batch_a(a.shape.begin(), a.shape.end() - 2);
  std::vector<SymExpr> batch_b(b.shape.begin(), b.shape.end() - 2), batch;
  if (!broadcast_shapes(batch_a, batch_b, &batch)) return fail(kind, "batch dims do not broadcast");
  batch.push_back(a.shape[a.rank() - 2]);
  batch.push_back(b.shape[b.rank() - 1]);
  return {{a.dtype, batch}, ""};
}

// Note [Top-k op]
// topk(x) {k = K}: the positions of the K largest elements of each row along x's last dim, as
// i64[..., K], best first. The order is a stable descending sort's: NaN above every number (the
// NaNs first, by position), then by value, equal values (-0 and +0 included) by position, lower
// first. That is what the frontend's former composition of K arg-max rounds gave (Note [Arg-max by
// composition], Note [Top-k ties] in frontends/python/dyngen/fx/select_ops.py); the values are a
// `gather` of x at the indices. 1 <= K <= kTopkMaxK (the kernel keeps the K best of a row in
// registers, codegen/emit_topk.cc), and K is provably at most the row's length, so every call has
// K distinct positions to give.
InferResult infer_topk(OpKind kind, const TensorType& x, const Attrs& attrs) {
  auto k = attrs.get_int("k");
  if (!k) return fail(kind, "missing attribute k");
  if (*k < 1 || *k > kTopkMaxK)
    return fail(kind,
                "k = " + std::to_string(*k) + " is outside [1, " + std::to_string(kTopkMaxK) + "]");
  if (x.rank() < 1) return fail(kind, "expects an operand of rank >= 1");
  if (!provably_ge(x.shape.back(), SymExpr(*k)))
    return fail(kind,
                "cannot prove k = " + std::to_string(*k) + " <= the last dim of " + x.to_string());
  std::vector<SymExpr> shape = x.shape;
  shape.back() = SymExpr(*k);
  return {{DType::kI64, shape}, ""};
}

InferResult infer_reduce(const Graph& g, OpKind kind, const std::vector<ValueId>& in,
                         const Attrs& attrs) {
  const TensorType& x = g.tensor(in[0]);
  if (kind == OpKind::kCumsum) {  // a scan: same shape; integers accumulate in i64 (PyTorch)
    auto dim = attrs.get_int("dim");
    if (!dim) return fail(kind, "missing attribute dim");
    if (norm_axis(*dim, std::max(x.rank(), 1)) < 0) return fail(kind, "dim out of range");
    DType dtype =
        attrs.get_dtype("dtype").value_or(dtype_is_float(x.dtype) ? x.dtype : DType::kI64);
    return {{dtype, x.shape}, ""};
  }
  if (kind == OpKind::kTopk) return infer_topk(kind, x, attrs);
  auto dims = attrs.get_ints("dims");
  if (!dims) return fail(kind, "missing attribute dims");
  int64_t keepdim = attrs.get_int("keepdim").value_or(0);
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t d : *dims) {
    int64_t a = norm_axis(d, x.rank());
    if (a < 0) return fail(kind, "dim " + std::to_string(d) + " out of range for " + x.to_string());
    if (reduced[a]) return fail(kind, "dim " + std::to_string(d) + " repeated");
    reduced[a] = true;
  }
  std::vector<SymExpr> shape;
  for (int i = 0; i < x.rank(); ++i) {
    if (!reduced[i])
      shape.push_back(x.shape[i]);
    else if (keepdim)
      shape.push_back(SymExpr(1));
  }
  DType dtype = attrs.get_dtype("dtype").value_or(x.dtype);
  if (kind == OpKind::kMean && !dtype_is_float(dtype)) return fail(kind, "needs a float dtype");
  return {{dtype, shape}, ""};
}

InferResult infer_layout(const Graph& g, OpKind kind, const std::vector<ValueId>& in,
                         const Attrs& attrs) {
  const TensorType& x = g.tensor(in[0]);
  switch (kind) {
    case OpKind::kReshape: {
      auto shape = attrs.get_syms("shape");
      if (!shape) return fail(kind, "missing attribute shape");
      TensorType out{x.dtype, *shape};
      if (out.numel() != x.numel())
        return fail(kind, "cannot reshape " + x.to_string() + " to " + out.to_string());
      return {out, ""};
    }
    case OpKind::kPermute: {
      auto dims = attrs.get_ints("dims");
      if (!dims || dims->size() != x.shape.size()) return fail(kind, "dims must list every axis");
      std::vector<bool> seen(x.shape.size(), false);
      std::vector<SymExpr> shape;
      for (int64_t d : *dims) {
        int64_t a = norm_axis(d, x.rank());
        if (a < 0 || seen[a]) return fail(kind, "dims is not a permutation");
        seen[a] = true;
        shape.push_back(x.shape[a]);
      }
      return {{x.dtype, shape}, ""};
    }
    case OpKind::kExpand: {
      auto shape = attrs.get_syms("shape");
      if (!shape || shape->size() < x.shape.size()) return fail(kind, "bad target shape");
      size_t lead = shape->size() - x.shape.size();
      for (size_t i = 0; i < x.shape.size(); ++i) {
        const SymExpr& from = x.shape[i];
        if (from != (*shape)[lead + i] && from != SymExpr(1))
          return fail(kind, "cannot expand " + x.to_string() + " to " +
                                TensorType{x.dtype, *shape}.to_string());
      }
      return {{x.dtype, *shape}, ""};
    }
    case OpKind::kSlice: {
      auto dim = attrs.get_int("dim");
      auto start = attrs.get_syms("start"), end = attrs.get_syms("end");
      int64_t step = attrs.get_int("step").value_or(1);
      if (!dim || !start || !end || start->size() != 1 || end->size() != 1)
        return fail(kind, "needs attributes dim, start, end");
      int64_t a = norm_axis(*dim, x.rank());
      if (a < 0) return fail(kind, "dim out of range");
      if (step < 1) return fail(kind, "step must be positive");
      const SymExpr &s = (*start)[0], &e = (*end)[0];
      if (!provably_ge(s, 0) || !provably_ge(e, s) || !provably_ge(x.shape[a], e))
        return fail(kind, "cannot prove 0 <= start <= end <= size on dim " + std::to_string(a));
      std::vector<SymExpr> shape = x.shape;
      shape[a] = ceildiv(e - s, SymExpr(step));
      return {{x.dtype, shape}, ""};
    }
    case OpKind::kCat: {
      auto dim = attrs.get_int("dim");
      if (!dim) return fail(kind, "missing attribute dim");
      int64_t a = norm_axis(*dim, x.rank());
      if (a < 0) return fail(kind, "dim out of range");
      std::vector<SymExpr> shape = x.shape;
      for (size_t i = 1; i < in.size(); ++i) {
        const TensorType& t = g.tensor(in[i]);
        if (t.dtype != x.dtype || t.rank() != x.rank())
          return fail(kind, "operands differ in type");
        for (int d = 0; d < x.rank(); ++d)
          if (d != a && t.shape[d] != x.shape[d])
            return fail(kind, "operands differ off the cat dim");
        shape[a] = shape[a] + t.shape[a];
      }
      return {{x.dtype, shape}, ""};
    }
    default:
      return fail(kind, "not a layout op");
  }
}

// gather(x, idx) / scatter(x, idx, src) along axis a (torch.gather / torch.scatter): idx has x's
// rank and, off the axis, dims no larger than x's; gather's result and scatter's src are shaped
// like idx.
InferResult infer_gather(const Graph& g, OpKind kind, const std::vector<ValueId>& in, int64_t a) {
  const TensorType& x = g.tensor(in[0]);
  const TensorType& idx = g.tensor(in[1]);
  if ((idx.dtype != DType::kI64 && idx.dtype != DType::kI32) || idx.rank() != x.rank())
    return fail(kind, "index must be an integer tensor of rank " + std::to_string(x.rank()) +
                          ", got " + idx.to_string());
  for (int d = 0; d < x.rank(); ++d)
    if (d != a && idx.shape[d] != x.shape[d] && !provably_ge(x.shape[d], idx.shape[d]))
      return fail(kind, "cannot prove index dim " + std::to_string(d) + " <= the operand's");
  if (kind == OpKind::kGather) return {{x.dtype, idx.shape}, ""};
  const TensorType& src = g.tensor(in[2]);
  if (src.dtype != x.dtype || src.shape != idx.shape)
    return fail(kind, "source must be " + TensorType{x.dtype, idx.shape}.to_string() + ", got " +
                          src.to_string());
  return {{x.dtype, x.shape}, ""};
}

InferResult infer_index(const Graph& g, OpKind kind, const std::vector<ValueId>& in,
                        const Attrs& attrs) {
  const TensorType& x = g.tensor(in[0]);
  const TensorType& idx = g.tensor(in[1]);
  auto dim = attrs.get_int("dim");
  if (!dim) return fail(kind, "missing attribute dim");
  int64_t a = norm_axis(*dim, x.rank());
  if (a < 0) return fail(kind, "dim out of range");
  if (kind == OpKind::kGather || kind == OpKind::kScatter) return infer_gather(g, kind, in, a);
  if ((idx.dtype != DType::kI64 && idx.dtype != DType::kI32) || idx.rank() != 1)
    return fail(kind, "index must be a 1-D integer tensor, got " + idx.to_string());
  std::vector<SymExpr> picked = x.shape;
  picked[a] = idx.shape[0];
  if (kind == OpKind::kIndexSelect) return {{x.dtype, picked}, ""};
  const TensorType& src = g.tensor(in[2]);
  if (src.dtype != x.dtype || src.shape != picked)
    return fail(kind, "source must be " + TensorType{x.dtype, picked}.to_string() + ", got " +
                          src.to_string());
  return {{x.dtype, x.shape}, ""};
}

}  // namespace

DType promote_types(DType a, bool a_is_scalar, DType b, bool b_is_scalar) {
  if (a == b) return a;
  int ca = category_rank(a), cb = category_rank(b);
  if (a_is_scalar != b_is_scalar) {
    // A 0-dim operand only matters when it is of a higher category.
    if (a_is_scalar && ca <= cb) return b;
    if (b_is_scalar && cb <= ca) return a;
  }
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if (float_rank(a) != float_rank(b)) return float_rank(a) > float_rank(b) ? a : b;
    return DType::kF32;  // bf16 with f16
  }
  if (ca == 1) return (a == DType::kI64 || b == DType::kI64) ? DType::kI64 : DType::kI32;
  return a;
}

bool broadcast_shapes(const std::vector<SymExpr>& a, const std::vector<SymExpr>& b,
                      std::vector<SymExpr>* out) {
  size_t n = std::max(a.size(), b.size());
  std::vector<SymExpr> r(n);
  for (size_t i = 0; i < n; ++i) {
    SymExpr da = i < n - a.size() ? SymExpr(1) : a[i - (n - a.size())];
    SymExpr db = i < n - b.size() ? SymExpr(1) : b[i - (n - b.size())];
    if (da == db || db == SymExpr(1))
      r[i] = da;
    else if (da == SymExpr(1))
      r[i] = db;
    else
      return false;
  }
  *out = std::move(r);
  return true;
}

InferResult infer_type(const Graph& g, OpKind kind, const std::vector<ValueId>& inputs,
                       const Attrs& attrs) {
  const OpInfo& info = op_info(kind);
  int n = static_cast<int>(inputs.size());
  if (n < info.min_inputs || (info.max_inputs >= 0 && n > info.max_inputs))
    return fail(kind, "takes " + std::to_string(info.min_inputs) +
                          (info.max_inputs == info.min_inputs
                               ? ""
                               : (info.max_inputs < 0 ? " or more"
                                                      : " to " + std::to_string(info.max_inputs))) +
                          " operands, got " + std::to_string(n));
  for (ValueId id : inputs) {
    if (id < 0 || static_cast<size_t>(id) >= g.values.size())
      return fail(kind, "operand %" + std::to_string(id) + " does not exist");
    if (g.value(id).kind != ValueKind::kTensor)
      return fail(kind, "operand %" + std::to_string(id) + " is not a tensor");
  }
  try {
    switch (info.category) {
      case OpCategory::kCreate: {
        auto dtype = attrs.get_dtype("dtype");
        if (!dtype) return fail(kind, "missing attribute dtype");
        if (kind == OpKind::kSymConstant) {  // the value of a symbolic integer, as a rank-0 tensor
          auto value = attrs.get_syms("value");
          if (!value || value->size() != 1) return fail(kind, "value must be sym[one expression]");
          return {{*dtype, {}}, ""};
        }
        if (!attrs.get_float("value")) return fail(kind, "missing attribute value");
        if (kind == OpKind::kConstant) return {{*dtype, {}}, ""};
        auto shape = attrs.get_syms("shape");
        if (!shape) return fail(kind, "missing attribute shape");
        for (auto& d : *shape)
          if (d.bounds().lo < 0) return fail(kind, "shape may be negative");
        return {{*dtype, *shape}, ""};
      }
      case OpCategory::kCast: {
        auto dtype = attrs.get_dtype("dtype");
        if (!dtype) return fail(kind, "missing attribute dtype");
        return {{*dtype, g.tensor(inputs[0]).shape}, ""};
      }
      case OpCategory::kUnary:
      case OpCategory::kBinary:
      case OpCategory::kCompare:
      case OpCategory::kWhere:
        return infer_elementwise(g, kind, inputs);
      case OpCategory::kMatmul:
        return infer_matmul(g, kind, inputs);
      case OpCategory::kReduce:
        return infer_reduce(g, kind, inputs, attrs);
      case OpCategory::kLayout:
        return infer_layout(g, kind, inputs, attrs);
      case OpCategory::kIndex:
        return infer_index(g, kind, inputs, attrs);
      case OpCategory::kGrouped:
        return infer_grouped(g, kind, inputs, attrs);
    }
  } catch (const std::exception& e) {
    return fail(kind, e.what());
  }
  return fail(kind, "unknown op");
}

}  // namespace dg
