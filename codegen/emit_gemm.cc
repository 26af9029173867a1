// The GEMM dispatch (codegen/gemm.h): which kernels a GEMM kernel spec lowers to.
#include "codegen/gemm.h"
#include "codegen/mma_sync_gemm.h"
#include "codegen/rank_gemm.h"
#include "codegen/scalar_gemm.h"
#include "codegen/tc_layout.h"
#include "codegen/wgmma_gemm.h"

namespace dg {

bool tensor_core_eligible(const GemmKernelSpec& spec) {
  if (!spec.k_segments.empty()) {  // every segment on its own, with the first one's layouts
    auto la = tc_layout(spec.a, spec.M, spec.k_segments[0].K, false);
    auto lb = tc_layout(spec.b[0], spec.k_segments[0].K, spec.N, true);
    if (!la || !lb) return false;
    for (const GemmKSegment& seg : spec.k_segments) {
      GemmKernelSpec one = spec;
      one.k_segments.clear();
      one.a = seg.a;
      one.b = seg.b;
      one.K = seg.K;
      auto a = tc_layout(seg.a, spec.M, seg.K, false);
      auto b = tc_layout(seg.b[0], seg.K, spec.N, true);
      if (!tensor_core_eligible(one) || a->transposed != la->transposed ||
          b->transposed != lb->transposed)
        return false;
    }
    return true;
  }
  if (!spec.batch.empty() || !spec.N.is_const() || !spec.K.is_const()) return false;
  if (*spec.K.as_const() == 0 || *spec.N.as_const() == 0) return false;
  if (spec.b.empty() || spec.b.size() > 2) return false;
  if (!tc_layout(spec.a, spec.M, spec.K, false)) return false;
  auto first = tc_layout(spec.b[0], spec.K, spec.N, true);
  if (!first) return false;
  for (const GemmOperandRef& b : spec.b) {
    auto l = tc_layout(b, spec.K, spec.N, true);
    if (!l || l->transposed != first->transposed || l->ld != first->ld) return false;
  }
  return true;
}

void emit_gemm(LoweringContext& ctx, GemmKernelSpec spec) {
  if (tensor_core_eligible(spec)) {
    if (ctx.options().wgmma && wgmma_eligible(spec)) return emit_sm90_gemm(ctx, spec);
    return emit_mma_sync_gemm(ctx, spec);
  }
  if (rank_gemm_eligible(spec)) {
    KernelParams params = std::move(spec.params);
    return emit_rank_gemm(ctx, {spec}, std::move(params));
  }
  emit_scalar_gemm(ctx, spec);
}

}  // namespace dg
