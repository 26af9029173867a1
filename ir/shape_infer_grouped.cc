// Shape inference and operand checks of the grouped-experts ops (the verifier checks every node
// through infer_type, so these are also the verifier's rules for them).
//
// Note [Grouped experts ops]
// A mixture-of-experts layer is written with four primitives whose output shapes are static in
// the routed-row count R (= T * k): the per-expert row counts are device data, never symbols.
//   expert_offsets(idx) {num_experts = E} -> i32[E]: offs[e] = #entries of idx whose expert is
//       <= e (inclusive cumulative counts, torch._grouped_mm's `offs`).
//   expert_order(idx) {num_experts = E} -> i32[numel(idx)]: order[p] = flat index of the p-th
//       entry when the entries are stably sorted by expert (a counting sort).
//   grouped_mm(a[R, K], offs[E], w_0, ..., w_{G-1}) {w_layout} -> [R, N]: rows
//       offs[e-1] <= r < offs[e] are multiplied by expert e's weight; rows >= offs[E-1] are 0.
//       The weights are either one fused tensor (G = 1: [E, N, K] for w_layout 0 "nk", [E, K, N]
//       for w_layout 1 "kn") or one tensor per expert (G = E: [N, K] or [K, N]), read where they
//       live. f32 accumulation, one rounding.
//   grouped_mm_wgrad(g[R, N], x[R, K], offs[E]) -> [E, N, K]: out[e] = g[seg e]^T @ x[seg e],
//       accumulated in f32 in a fixed order; an empty segment gives zeros.
// An expert index outside [0, E) is bad input: the reference evaluator raises and generated
// kernels never read or write out of bounds (Note [Bad expert indices] in
// codegen/emit_moe_route.cc). The attribute w_layout is an int because attributes hold no strings.
#include "ir/shape_infer_grouped.h"

namespace dg {
namespace {

InferResult fail(OpKind kind, const std::string& msg) {
  return {{}, std::string(op_name(kind)) + ": " + msg};
}

bool is_index_dtype(DType t) { return t == DType::kI64 || t == DType::kI32; }
bool is_gemm_dtype(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }

InferResult infer_routing(const Graph& g, OpKind kind, const std::vector<ValueId>& in,
                          const Attrs& attrs) {
  const TensorType& idx = g.tensor(in[0]);
  if (!is_index_dtype(idx.dtype))
    return fail(kind, "top_k_index must be i64 or i32, got " + idx.to_string());
  auto experts = attrs.get_int("num_experts");
  if (!experts) return fail(kind, "missing attribute num_experts");
  if (*experts < 1) return fail(kind, "num_experts must be >= 1, got " + std::to_string(*experts));
  if (kind == OpKind::kExpertOffsets) return {{DType::kI32, {SymExpr(*experts)}}, ""};
  return {{DType::kI32, {idx.numel()}}, ""};
}

// offs must be i32[E] with E a constant; returns E or an error.
std::string check_offsets(const TensorType& offs, int64_t* experts) {
  if (offs.dtype != DType::kI32 || offs.rank() != 1 || !offs.shape[0].as_const() ||
      *offs.shape[0].as_const() < 1)
    return "offs must be i32[E] with a constant E >= 1, got " + offs.to_string();
  *experts = *offs.shape[0].as_const();
  return "";
}

InferResult infer_grouped_mm(const Graph& g, OpKind kind, const std::vector<ValueId>& in,
                             const Attrs& attrs) {
  const TensorType& a = g.tensor(in[0]);
  if (!is_gemm_dtype(a.dtype) || a.rank() != 2)
    return fail(kind, "a must be a bf16, f16 or f32 matrix [R, K], got " + a.to_string());
  int64_t experts = 0;
  if (auto e = check_offsets(g.tensor(in[1]), &experts); !e.empty()) return fail(kind, e);
  int64_t layout = attrs.get_int("w_layout").value_or(-1);
  if (layout != 0 && layout != 1)
    return fail(kind, "w_layout must be 0 (weights [N, K]) or 1 (weights [K, N])");
  const int64_t groups = static_cast<int64_t>(in.size()) - 2;
  if (groups != 1 && groups != experts)
    return fail(kind, "takes 1 fused weight [E, ...] or E = " + std::to_string(experts) +
                          " per-expert weights, got " + std::to_string(groups));
  const bool fused = groups == 1;
  const int rank = fused ? 3 : 2;
  const TensorType& w0 = g.tensor(in[2]);
  if (w0.rank() != rank)
    return fail(kind, std::string(fused ? "the fused weight" : "each weight") + " must have rank " +
                          std::to_string(rank) + ", got " + w0.to_string());
  if (fused && w0.shape[0] != SymExpr(experts))
    return fail(kind, "the fused weight's first dim must be E = " + std::to_string(experts) +
                          " (from offs), got " + w0.to_string());
  for (size_t i = 2; i < in.size(); ++i) {
    const TensorType& w = g.tensor(in[i]);
    if (w.dtype != a.dtype)
      return fail(kind, "weights must have a's dtype " + std::string(dtype_name(a.dtype)) +
                            ", got " + w.to_string());
    if (w.shape != w0.shape)
      return fail(
          kind, "per-expert weights differ in shape: " + w0.to_string() + " and " + w.to_string());
  }
  const SymExpr& n = layout == 0 ? w0.shape[rank - 2] : w0.shape[rank - 1];
  const SymExpr& k = layout == 0 ? w0.shape[rank - 1] : w0.shape[rank - 2];
  if (k != a.shape[1])
    return fail(kind, "inner dims differ: a " + a.to_string() + " and weight " + w0.to_string() +
                          (layout == 0 ? " (layout nk)" : " (layout kn)"));
  return {{a.dtype, {a.shape[0], n}}, ""};
}

InferResult infer_grouped_mm_wgrad(const Graph& g, OpKind kind, const std::vector<ValueId>& in) {
  const TensorType& dy = g.tensor(in[0]);
  const TensorType& x = g.tensor(in[1]);
  if (!is_gemm_dtype(dy.dtype) || dy.rank() != 2)
    return fail(kind, "g must be a bf16, f16 or f32 matrix [R, N], got " + dy.to_string());
  if (x.dtype != dy.dtype || x.rank() != 2 || x.shape[0] != dy.shape[0])
    return fail(kind, "x must be " + std::string(dtype_name(dy.dtype)) + "[" +
                          dy.shape[0].to_string() + ", K], got " + x.to_string());
  int64_t experts = 0;
  if (auto e = check_offsets(g.tensor(in[2]), &experts); !e.empty()) return fail(kind, e);
  return {{dy.dtype, {SymExpr(experts), dy.shape[1], x.shape[1]}}, ""};
}

}  // namespace

InferResult infer_grouped(const Graph& g, OpKind kind, const std::vector<ValueId>& in,
                          const Attrs& attrs) {
  switch (kind) {
    case OpKind::kExpertOffsets:
    case OpKind::kExpertOrder:
      return infer_routing(g, kind, in, attrs);
    case OpKind::kGroupedMm:
      return infer_grouped_mm(g, kind, in, attrs);
    case OpKind::kGroupedMmWgrad:
      return infer_grouped_mm_wgrad(g, kind, in);
    default:
      return fail(kind, "not a grouped-experts op");
  }
}

}  // namespace dg
