// Internal: the scalar GEMM tile (Note [Simple GEMM] in emit_scalar_gemm.cc), the path for every
// GEMM the tensor-core and rank-r kernels cannot take; its pieces are shared with the grouped
// kernels (emit_grouped_gemm.cc).
#pragma once
#include <string>
#include <vector>

#include "codegen/gemm_spec.h"

namespace dg {

// Where the scalar tile reads its operands: pointer expressions, and the offsets of element
// (0, 0) of A and of each B (the spec's strides apply).
struct ScalarOperands {
  std::string a, a_base;
  std::vector<std::string> b, b_base;
};

// The epilogue lambda and the calls for the thread's 4x4 micro-tile, in the scalar tile's scope.
std::string scalar_stores(const GemmKernelSpec& spec);

// The scalar tile's code: the spec's shape, strides and dtypes, its shared memory at function
// scope, operands read through `ops`, then `stores` with the accumulators c<j> in scope. K
// segments add their buffers to `params`.
std::string scalar_body(const GemmKernelSpec& spec, const ScalarOperands& ops,
                        const std::string& stores, KernelParams& params);

// Emits the GEMM's one kernel on the scalar tile and records its launch.
void emit_scalar_gemm(LoweringContext& ctx, GemmKernelSpec& spec);

}  // namespace dg
