// Lowering of grouped_mm and grouped_mm_wgrad (Note [Grouped experts ops] in
// ir/shape_infer_grouped.cc). grouped_mm's row tiles are scheduled over the device-side offsets
// with a worst-case grid (Note [Grouped tile schedule] in codegen/device/dg_grouped.cuh): no host
// read. A block's expert weight is read where it lives: the fused [E, ...] parameter at expert e's
// slice, or the e-th of E separate weight parameters (Note [Per-expert weight pointers]).
// bf16 with K (and N for "kn" weights) a multiple of 8 runs the project's mma.sync main loop
// (codegen/device/dg_gemm_sm80.cuh) with the segment's end as M; everything else (f32 LoRA
// factors, f16, ragged dims) the scalar grouped tile. On sm_90a a bf16 grouped_mm with N and K
// multiples of 8, at least 64, runs the wgmma + TMA kernel of codegen/emit_grouped_wgmma.cc, and
// the mma.sync kernel is its fallback (Note [Grouped wgmma tile]). grouped_mm_wgrad: one block per
// (expert, 64 x 64 tile of [N, K]) looping over its segment's rows in order: deterministic, no
// atomics.
//
// Note [Per-expert weight pointers]
// With G = E separate weights (nn.Linear per expert) each weight is a kernel pointer parameter of
// its own and a block picks its expert's with a switch on the expert, once, before its main loop:
// no stacked copy and no device table to build per call. Kernel parameters are limited to 4 KB,
// so at most kMaxWeightPointers (256, 2 KB of pointers) experts take this form; a fused [E, N, K]
// parameter has no limit.
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/grouped_experts.h"
#include "codegen/kernel_params.h"
#include "codegen/mma_sync_snippets.h"

namespace dg {

namespace {

constexpr int kMaxWeightPointers = 256;

// Whether the tensor-core main loop takes the problem (its preconditions: bf16, K and, for a
// [K, N] weight, N multiples of 8, so every row of every operand starts 16-byte aligned when the
// bases are; the main loop checks the bases itself).
bool on_tensor_cores(const GroupedMmShape& p) {
  auto multiple_of_8 = [](const SymExpr& d) { return d.as_const() && *d.as_const() % 8 == 0; };
  return p.dtype == DType::kBF16 && multiple_of_8(p.K) && (!p.kn || multiple_of_8(p.N)) &&
         p.N.as_const();
}

// `const T* w = ...;` for the block's expert `e` (Note [Per-expert weight pointers]).
std::string weight_pointer(const GroupedMmShape& p, KernelParams& params, LoweringContext& ctx) {
  const std::string t = ctype(p.dtype);
  std::vector<std::string> names;
  for (size_t i = 2; i < p.node.inputs.size(); ++i)
    names.push_back(params.add(ctx.buffer_of(p.node.inputs[i]), p.dtype, false));
  if (p.fused) return "  const " + t + "* const w = " + names[0] + " + (long long)e * N * K;\n";
  std::string s = "  const " + t + "* w = " + names[0] + ";\n  switch (e) {\n";
  for (size_t e = 1; e < names.size(); ++e)
    s += "    case " + std::to_string(e) + ": w = " + names[e] + "; break;\n";
  return s + "    default: break;\n  }\n";
}

std::string tc_body(const GroupedMmShape& p, const std::string& out, const std::string& a) {
  const std::string bkn = p.kn ? "true" : "false";
  return "  float acc[1][Tile::MT][Tile::NT][4];\n"
         "  DG_UNROLL\n  for (int mt = 0; mt < Tile::MT; ++mt)\n"
         "    DG_UNROLL\n    for (int nt = 0; nt < Tile::NT; ++nt)\n"
         "      DG_UNROLL\n      for (int i = 0; i < 4; ++i) acc[0][mt][nt][i] = 0.0f;\n"
         "  const dg_bf16* const b[1] = {w};\n"
         "  dg_gemm_mainloop<Tile, false, " +
         bkn + ", 1>(acc, " + a + ", K, b, " + (p.kn ? "N" : "K") +
         ", m0, m_end, n0, N, 0, K);\n"
         "  dg_gemm_epilogue<Tile, 1>(acc, m0, m_end, n0, N, [&](long long row, int col, float v) "
         "{\n    " +
         out + "[row * N + col] = dg_convert<dg_bf16>(v);\n  });\n";
}

}  // namespace

GroupedMmShape grouped_mm_shape(const Graph& g, const Node& node) {
  const TensorType& a = g.tensor(node.inputs[0]);
  const TensorType& out = g.tensor(node.output);
  return {node,
          a.dtype,
          *g.tensor(node.inputs[1]).shape[0].as_const(),
          node.inputs.size() == 3,
          node.attrs.get_int("w_layout").value_or(0) == 1,
          a.shape[0],
          out.shape[1],
          a.shape[1]};
}

bool grouped_mm_on_tensor_cores(const Graph& g, const Node& node) {
  return node.op == OpKind::kGroupedMm && on_tensor_cores(grouped_mm_shape(g, node));
}

void emit_grouped_mm(LoweringContext& ctx, const Node& node) {
  const GroupedMmShape p = grouped_mm_shape(ctx.graph(), node);
  if (!p.fused && p.experts > kMaxWeightPointers)
    throw std::invalid_argument("grouped_mm with " + std::to_string(p.experts) +
                                " separate expert weights: at most " +
                                std::to_string(kMaxWeightPointers) +
                                " fit the kernel's parameters (pass one fused [E, N, K] weight)");
  const bool tc = on_tensor_cores(p);
  const int bn = tc && *p.N.as_const() <= 64 ? 64 : (tc ? 128 : 64);
  const TileConfig t = tc ? TileConfig{64, bn, 32, 2, bn / 64, 3} : TileConfig{64, 64, 16, 1, 1, 1};
  const int threads = tc ? t.threads() : 256;
  const std::string E = std::to_string(p.experts), T = ctype(p.dtype);

  KernelParams params;
  const std::string o = params.add(ctx.buffer_of(node.output), p.dtype, true);
  const std::string x = params.add(ctx.buffer_of(node.inputs[0]), p.dtype, false);
  const std::string offs = params.add(ctx.buffer_of(node.inputs[1]), DType::kI32, false);
  const std::string weight = weight_pointer(p, params, ctx);
  KernelLaunch k;
  k.name = ctx.kernel_name("grouped_mm");
  // On sm_90a the wgmma kernel first, this one its fallback (Note [Grouped wgmma tile]).
  const bool wgmma = grouped_mm_on_wgmma(p, ctx.options());
  if (wgmma) {
    emit_grouped_mm_wgmma(ctx, p, k.name);
    k.name += "_fallback";
    k.variant = 1;
    k.fallback = true;
  }
  k.summary =
      "%" + std::to_string(node.output) + " = grouped_mm over " + E + " experts (" +
      (p.fused ? "fused weight" : "per-expert weights") + ", " + (p.kn ? "kn" : "nk") +
      "), N=" + p.N.to_string() + " K=" + p.K.to_string() + " " +
      (tc ? tc_tag(t) + "]" : "[scalar 64x64 tile]") + ", worst-case grid over offsets" +
      (wgmma ? ", fallback for a call whose addresses or tensor maps the wgmma kernel refuses"
             : "");
  k.grid = {ceildiv(p.R, SymExpr(t.bm)) + SymExpr(p.experts + 1), ceildiv(p.N, SymExpr(t.bn)),
            SymExpr(1)};
  k.block = {threads, 1, 1};
  k.buffers = params.buffers();
  std::string src = "#include \"dg_grouped.cuh\"\n";
  if (tc) src += "typedef " + tile_template(t) + " " + k.name + "_Tile;\n";
  src += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(threads) + ") " +
         k.name + "(" + params.declaration() + ctx.symbol_params() + ") {\n";
  if (tc) src += "  typedef " + k.name + "_Tile Tile;\n";
  src += "  const long long R = " + c_expr(p.R) + ", N = " + c_expr(p.N) + ", K = " + c_expr(p.K) +
         ";\n  long long m0 = 0, m_end = 0;\n  const int e = dg_grouped_tile<" + E + ">(" + offs +
         ", R, blockIdx.x, " + std::to_string(t.bm) +
         ", &m0, &m_end);\n  const long long n0 = (long long)blockIdx.y * " + std::to_string(t.bn) +
         ";\n  if (e < 0 || n0 >= N) return;  // a surplus tile\n" + "  if (e == " + E +
         ") {  // the rows past offs[E-1]: zeros\n    dg_grouped_zero_tile<" + T + ", " +
         std::to_string(threads) + ", " + std::to_string(t.bm) + ", " + std::to_string(t.bn) +
         ">(" + o + ", m0, m_end, n0, N);\n    return;\n  }\n" + weight;
  if (tc)
    src += tc_body(p, o, x);
  else
    src += "  dg_grouped_scalar_tile<" + T + ", " + (p.kn ? "true" : "false") + ">(" + o + ", " +
           x + ", w, m0, m_end, n0, N, K);\n";
  ctx.add_kernel(std::move(k), src + "}\n");
}

void emit_grouped_mm_wgrad(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  const TensorType& dy = g.tensor(node.inputs[0]);
  const TensorType& x = g.tensor(node.inputs[1]);
  const int64_t experts = *g.tensor(node.inputs[2]).shape[0].as_const();
  KernelParams params;
  const std::string o = params.add(ctx.buffer_of(node.output), dy.dtype, true);
  const std::string gp = params.add(ctx.buffer_of(node.inputs[0]), dy.dtype, false);
  const std::string xp = params.add(ctx.buffer_of(node.inputs[1]), x.dtype, false);
  const std::string offs = params.add(ctx.buffer_of(node.inputs[2]), DType::kI32, false);
  KernelLaunch k;
  k.name = ctx.kernel_name("grouped_mm_wgrad");
  k.summary = "%" + std::to_string(node.output) + " = grouped_mm_wgrad over " +
              std::to_string(experts) + " experts, [N, K] = [" + dy.shape[1].to_string() + ", " +
              x.shape[1].to_string() + "], one block per expert and 64x64 tile over its rows";
  k.grid = {SymExpr(experts), ceildiv(dy.shape[1], SymExpr(64)), ceildiv(x.shape[1], SymExpr(64))};
  k.block = {256, 1, 1};
  k.buffers = params.buffers();
  const std::string src =
      "#include \"dg_grouped.cuh\"\nextern \"C\" __global__ void "
      "__launch_bounds__(256) " +
      k.name + "(" + params.declaration() + ctx.symbol_params() + ") {\n  dg_grouped_wgrad_tile<" +
      ctype(dy.dtype) + ", " + std::to_string(experts) + ">(" + o + ", " + gp + ", " + xp + ", " +
      offs + ", " + c_expr(dy.shape[0]) + ", " + c_expr(dy.shape[1]) + ", " + c_expr(x.shape[1]) +
      ");\n}\n";
  ctx.add_kernel(std::move(k), src);
}

void emit_grouped_experts_node(LoweringContext& ctx, const Node& node) {
  switch (node.op) {
    case OpKind::kExpertOffsets:
    case OpKind::kExpertOrder:
      return emit_moe_route(ctx, node);
    case OpKind::kGroupedMm:
      return emit_grouped_mm(ctx, node);
    default:
      return emit_grouped_mm_wgrad(ctx, node);
  }
}

}  // namespace dg
