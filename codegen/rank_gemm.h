// Internal: the split-K kernels for GEMMs with a handful of output columns and a long K, the LoRA
// rank-r products (Note [Rank-r products] in emit_rank_gemm.cc).
#pragma once
#include <vector>

#include "codegen/gemm_spec.h"

namespace dg {

// True when the split-K rank-r kernel can take the spec (Note [Rank-r products] in
// emit_rank_gemm.cc): f32 accumulation, static N and K >= 256 with all B columns (N times the B
// count) at most 64, no batch or K segments, 16-byte vectors along each operand's contiguous dim.
bool rank_gemm_eligible(const GemmKernelSpec& spec);
// Emits one split-K kernel: the partial products, summed in split order by the last CTA of each
// row tile, which runs the epilogue (Note [Last block reduces]); problem p on blockIdx.z == p;
// `params` holds every problem's epilogue buffers (as for a grouped GEMM).
void emit_rank_gemm(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                    KernelParams params);

}  // namespace dg
