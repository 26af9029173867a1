// Internal: tensor-core GEMMs on sm_90a (Note [sm_90a GEMMs] in emit_wgmma.cc): wgmma fed by TMA,
// for specs tensor_core_eligible (codegen/gemm.h) accepts.
#pragma once
#include "codegen/gemm_spec.h"

namespace dg {

// True when the sm_90a main loop can take a tensor-core spec (Note [sm_90a GEMMs] in
// emit_wgmma.cc): A K-major, every B K-major or every B N-major.
bool wgmma_eligible(const GemmKernelSpec& spec);
// The sm_90a kernels of such a GEMM: wgmma tiles by M, mma.sync for the smallest M, and the
// fallback (Note [GEMM fallbacks] in kernel_plan.h).
void emit_sm90_gemm(LoweringContext& ctx, GemmKernelSpec& spec);

}  // namespace dg
