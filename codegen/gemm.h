// Internal: the entry of the GEMM emitters. emit_gemm picks a GEMM's kernels:
// - mma.sync tensor cores (Note [Tensor-core GEMM] in codegen/device/dg_gemm_sm80.cuh) when the
//   operands allow it, wgmma on sm_90a (Note [sm_90a GEMMs] in emit_wgmma.cc) where it can;
// - the split-K kernels for narrow GEMMs with a long K (Note [Rank-r products] in
//   emit_rank_gemm.cc);
// - the scalar tile otherwise (Note [Simple GEMM] in emit_scalar_gemm.cc).
//
// The emitters call down only:
//   emit_grouped_gemm.cc (grouped GEMM groups)
//     -> emit_gemm.cc (this header: the dispatch)
//       -> emit_wgmma.cc -> emit_mma_sync_gemm.cc; emit_rank_gemm.cc; emit_scalar_gemm.cc
//         -> mma_sync_snippets, gemm_snippets, tc_layout (source pieces and operand layouts)
//           -> gemm_spec.h (GemmKernelSpec), kernel_params (KernelParams)
#pragma once
#include "codegen/gemm_spec.h"
#include "codegen/lowering.h"

namespace dg {

// True when the tensor-core kernel can take the spec: bf16 operands, static N and K, 16-byte
// multiples along every operand's contiguous dim and leading dimension, no batch.
bool tensor_core_eligible(const GemmKernelSpec& spec);

// Emits the kernel (tensor cores when eligible) and records its launch.
void emit_gemm(LoweringContext& ctx, GemmKernelSpec spec);

}  // namespace dg
