// Tensor-core GEMM kernels on mma.sync: the template of codegen/device/dg_gemm_sm80.cuh
// instantiated for a spec's tile, operand layouts, K segments and epilogue.
#include <optional>

#include "codegen/c_expr.h"
#include "codegen/gemm_snippets.h"
#include "codegen/mma_sync_gemm.h"
#include "codegen/mma_sync_snippets.h"
#include "codegen/tc_layout.h"

namespace dg {

namespace {

// The kernel of a tensor-core GEMM: its block's mainloop, once per K segment into the same
// accumulators, then the epilogue (Note [Tensor-core GEMM] in dg_gemm_sm80.cuh), its rank-r
// products' operands staged in shared memory at `staged` (rank_staging's offsets) when it has a
// value. The GEMM's fallback kernel (Note [GEMM fallbacks]) loads and stores element by element
// where addresses need it; the other kernels read 16-byte aligned operands only and store their
// outputs in pairs where pairs_outputs allows it (Note [Paired stores]).
std::string tc_source(LoweringContext& ctx, GemmKernelSpec& spec, const std::string& name,
                      const TileConfig& t, bool at, bool bkn,
                      const std::optional<std::vector<int64_t>>& staged, bool fallback) {
  const int nb = static_cast<int>(spec.b.size());
  const std::string NB = std::to_string(nb);
  std::string loops;
  for (const GemmKSegment& seg : k_segments_or_whole(spec)) {
    const std::string a = spec.params.add_checked(seg.a.buffer, DType::kBF16, seg.a.offset);
    std::string bs;
    for (const GemmOperandRef& b : seg.b)
      bs += (bs.empty() ? "" : ", ") + spec.params.add_checked(b.buffer, DType::kBF16, b.offset);
    auto la = tc_layout(seg.a, spec.M, seg.K, false);
    auto lb = tc_layout(seg.b[0], seg.K, spec.N, true);
    loops +=
        tc_mainloop(NB, at, bkn, a, c_expr(la->ld), bs, c_expr(lb->ld), c_expr(seg.K), !fallback);
  }
  const std::string tile_args = tc_tile_args(at, bkn, nb);
  const std::string epilogue =
      epilogue_call(spec, spec.params, staged.has_value(), "epi", !fallback);
  return kernel_header(name, t.threads(), spec.params, ctx) + "  typedef " + tile_template(t) +
         " Tile;\n" + "  const long long M = " + c_expr(spec.M) + ", N = " + c_expr(spec.N) +
         ";\n" + "  const long long c_base = 0;\n" +
         (staged ? scratch_fits(spec.products, *staged, tile_args) + scratch_pointer(tile_args)
                 : "") +
         epilogue_lambda(spec, "float", "epi", staged.has_value()) + tc_block_setup(NB) + loops +
         tc_sum_slices(NB, tile_args) + (staged ? rank_staging_code(spec.products, *staged) : "") +
         epilogue + "}\n";
}

}  // namespace

void emit_mma_sync_kernel(LoweringContext& ctx, GemmKernelSpec& spec, KernelLaunch launch,
                          const TileConfig& t, const std::string& range) {
  const TcTransposes tr = tc_transposes(spec);
  const auto staged =
      rank_staging(spec.products, t, tr.at, tr.bkn, static_cast<int>(spec.b.size()));
  launch.summary =
      spec.summary + " " + tc_tag(t) + (staged ? ", rank-r operands staged" : "") + range + "]";
  launch.nodes = spec.nodes;
  std::string src = tc_source(ctx, spec, launch.name, t, tr.at, tr.bkn, staged, launch.fallback);
  launch.buffers = spec.params.buffers();
  // Note [GEMM fallbacks]: the fallback takes any address; the other variants hand it the calls
  // whose operands or outputs are off (their checks: 16-byte reads, the epilogue's pairs).
  launch.aligned_only = !launch.fallback;
  for (const CheckedOperand& c : spec.params.checked_operands())  // the variants share params
    if (launch.aligned_only || !c.epilogue_pairs()) launch.checked_operands.push_back(c);
  ctx.add_kernel(std::move(launch), src);
}

void emit_gemm_fallback(LoweringContext& ctx, GemmKernelSpec& spec, const std::string& base,
                        int variant) {
  const TileConfig t =
      tile_variants(spec.M, *spec.N.as_const(), static_cast<int>(spec.b.size())).front().tile;
  KernelLaunch launch;
  launch.name = base + variant_suffix(t) + "_fallback";
  launch.variant = variant;
  launch.fallback = true;
  launch.grid = {ceildiv(spec.M, SymExpr(t.bm)), ceildiv(spec.N, SymExpr(t.bn)), SymExpr(1)};
  launch.block = {t.threads(), 1, 1};
  emit_mma_sync_kernel(ctx, spec, std::move(launch), t,
                       ", fallback for a call whose addresses or tensor maps the others refuse");
}

void emit_mma_sync_gemm(LoweringContext& ctx, GemmKernelSpec& spec) {
  const int nb = static_cast<int>(spec.b.size());
  const std::vector<TileVariant> variants = tile_variants(spec.M, *spec.N.as_const(), nb);
  const std::string base = ctx.kernel_name(spec.what);
  for (size_t v = 0; v < variants.size(); ++v) {
    const TileConfig& t = variants[v].tile;
    emit_mma_sync_kernel(ctx, spec,
                         variant_launch(base, variants, v, spec.M, spec.N, SymExpr(1), t.threads()),
                         t, range_tag(variants, v));
  }
  emit_gemm_fallback(ctx, spec, base, static_cast<int>(variants.size()));
}

}  // namespace dg
