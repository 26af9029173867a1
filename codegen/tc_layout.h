// Internal: how a GEMM's operands sit in memory for the tensor-core main loops (mma.sync in
// codegen/device/dg_gemm_sm80.cuh, wgmma in dg_gemm_sm90.cuh): which dim is contiguous, and the
// leading dimension.
#pragma once
#include <optional>

#include "codegen/gemm_spec.h"

namespace dg {

// Tensor-core operand layout: AT / BKN of dg_gemm_tc and the leading dimension.
struct TcLayout {
  bool transposed = false;
  SymExpr ld;
};

// A (m, k): k contiguous (AT = false) or m contiguous (AT = true). B (k, n): k contiguous
// (BKN = false) or n contiguous (BKN = true). The contiguous extent must be a multiple of 8.
// nullopt when the operand fits neither (or is not bf16).
std::optional<TcLayout> tc_layout(const GemmOperandRef& op, const SymExpr& rows,
                                  const SymExpr& cols, bool is_b);

// For a spec tensor_core_eligible accepts: whether A is stored m-contiguous (A^T) and B
// n-contiguous (dg_gemm_mainloop's AT and BKN).
struct TcTransposes {
  bool at, bkn;
};
TcTransposes tc_transposes(const GemmKernelSpec& spec);

}  // namespace dg
