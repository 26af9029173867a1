// Tensor-core operand layouts (tc_layout.h).
#include "codegen/tc_layout.h"

namespace dg {

namespace {

bool multiple_of_8(const SymExpr& e) { return e.divisor() % 8 == 0; }  // divisor(0) == 0

}  // namespace

std::optional<TcLayout> tc_layout(const GemmOperandRef& op, const SymExpr& rows,
                                  const SymExpr& cols, bool is_b) {
  if (op.load_dtype != DType::kBF16 || op.value_dtype != DType::kBF16) return std::nullopt;
  if (!multiple_of_8(op.offset)) return std::nullopt;
  // For A, rows = M and cols = K; for B, rows = K and cols = N.
  const SymExpr& k_extent = is_b ? rows : cols;
  const SymExpr& other = is_b ? cols : rows;
  const SymExpr& k_stride = is_b ? op.row_stride : op.col_stride;
  const SymExpr& o_stride = is_b ? op.col_stride : op.row_stride;
  if (k_stride == SymExpr(1) && multiple_of_8(k_extent) && multiple_of_8(o_stride))
    return TcLayout{false, o_stride};
  if (o_stride == SymExpr(1) && multiple_of_8(other) && multiple_of_8(k_stride))
    return TcLayout{true, k_stride};
  return std::nullopt;
}

TcTransposes tc_transposes(const GemmKernelSpec& spec) {
  const SymExpr& k0 = spec.k_segments.empty() ? spec.K : spec.k_segments[0].K;
  return {tc_layout(spec.a, spec.M, k0, false)->transposed,
          tc_layout(spec.b[0], k0, spec.N, true)->transposed};
}

}  // namespace dg
