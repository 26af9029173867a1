// grouped_mm on sm_90a: the worst-case grid of row tiles over the device-side offsets (Note
// [Grouped tile schedule] in codegen/device/dg_grouped.cuh), each block the warp-specialized
// wgmma + TMA main loop over its expert's segment (Note [Grouped wgmma tile] in
// codegen/device/dg_grouped_sm90.cuh). The mma.sync grouped kernel (codegen/emit_grouped_mm.cc)
// follows as its fallback (Note [GEMM fallbacks]): a call whose maps the driver refuses (an
// operand off its 16-byte boundary) or whose output is off its pairs' boundary runs that instead.
//
// Note [Grouped weight maps]
// The weights are read where they live, through tensor maps the runtime encodes at every call
// (Note [Tensor maps] in codegen/kernel_plan.h; the weights are never copied):
// - a fused [E, N, K] parameter: one map over it as [E x N][K], expert e's rows from e N;
// - E separate weights, or a fused [E, K, N] parameter (whose slices must end at K, so that the
//   last k tile's overhang reads zeros rather than the next expert's rows): one map per expert,
//   kernel parameters after A's map, and the block picks its expert's with a switch.
// A map is 128 bytes: kMaxExpertMaps (128) maps and the pointers stay far inside the 32 KB of
// kernel parameters CUDA 12.1 allows on sm_70 and later (4 KB before); more experts with
// per-expert maps run the mma.sync grouped kernel.
#include <algorithm>

#include "codegen/c_expr.h"
#include "codegen/grouped_experts.h"
#include "codegen/kernel_params.h"

namespace dg {

namespace {

constexpr int64_t kMaxExpertMaps = 128;
// The smallest N and K the wgmma tile takes (a 64-column box, one 64-wide k tile); smaller
// problems stay on mma.sync.
constexpr int64_t kMinN = 64, kMinK = 64;
// Stages of the ring (as Note [sm_90a GEMMs] in codegen/emit_wgmma.cc picks them): 4 of 48 KB
// for the 128 x 256 tile (BN 256 from N = 256: one n256 wgmma a k16 step, the fewest shared-memory
// bytes per FLOP, Note [Wide gate/up tile], and half the blocks, so half the prologues).
constexpr int kStages = 4;

bool one_fused_map(const GroupedMmShape& p) { return p.fused && !p.kn; }

struct GroupedWgmmaTile {
  int bm = 128, bn = 128;
  int threads() const { return 128 * (bm / 64 + 1); }
  // DgWgmmaTile::kSmemBytes: the stages (A's and B's 64-wide k tiles), then two barriers each and
  // the `staged` barrier.
  int smem_bytes() const { return kStages * 128 * (bm + bn) + 16 * kStages + 8; }
};

int param_index(const KernelParams& params, BufferRef buffer) {
  const std::vector<BufferRef>& b = params.buffers();
  return static_cast<int>(std::find(b.begin(), b.end(), buffer) - b.begin());
}

// `const DgTensorMap* b_map` and `long long b_n0` for expert `e` (Note [Grouped weight maps]).
std::string weight_map_code(const GroupedMmShape& p) {
  if (one_fused_map(p))
    return "  const DgTensorMap* const b_map = &dg_map1;\n  const long long b_n0 = e * N + n0;\n";
  std::string s = "  const DgTensorMap* b_map = &dg_map1;\n  switch (e) {\n";
  for (int64_t e = 1; e < p.experts; ++e)
    s += "    case " + std::to_string(e) + ": b_map = &dg_map" + std::to_string(1 + e) +
         "; break;\n";
  return s + "    default: break;\n  }\n  const long long b_n0 = n0;\n";
}

}  // namespace

bool grouped_mm_on_wgmma(const GroupedMmShape& p, const CodegenOptions& options) {
  if (!options.wgmma || p.dtype != DType::kBF16) return false;
  const std::optional<int64_t> n = p.N.as_const(), k = p.K.as_const();
  // 16-byte row strides for TMA (K, and N for [K, N] weights) and an even N for the pairs.
  if (!n || !k || *n % 8 != 0 || *k % 8 != 0 || *n < kMinN || *k < kMinK) return false;
  // The fused map's box coordinates e N + n0 are ints.
  if (one_fused_map(p)) return p.experts * *n < (int64_t{1} << 31);
  return p.experts <= kMaxExpertMaps;
}

void emit_grouped_mm_wgmma(LoweringContext& ctx, const GroupedMmShape& p, const std::string& name) {
  GroupedWgmmaTile t;
  const int64_t n = *p.N.as_const();
  t.bn = n >= 256 ? 256 : n > 64 ? 128 : 64;
  const std::string E = std::to_string(p.experts);
  const SymExpr two(2);

  // int offsets and tile indices (dg_grouped_tile_by_warp); an int32 offset names no more rows.
  ctx.require_positive(SymExpr(int64_t{1} << 31) - p.R,
                       "grouped_mm over more than 2^31 - 1 routed rows");
  KernelParams params;
  const std::string o = params.add(ctx.buffer_of(p.node.output), p.dtype, true);
  params.add(ctx.buffer_of(p.node.inputs[0]), p.dtype, false);  // A, read through its map
  const std::string offs = params.add(ctx.buffer_of(p.node.inputs[1]), DType::kI32, false);
  std::vector<int> weights;
  for (size_t i = 2; i < p.node.inputs.size(); ++i) {
    params.add(ctx.buffer_of(p.node.inputs[i]), p.dtype, false);
    weights.push_back(param_index(params, ctx.buffer_of(p.node.inputs[i])));
  }
  params.check_paired_output(ctx.buffer_of(p.node.output), p.dtype);

  KernelLaunch k;
  k.name = name;
  // A: every routed row, boxes of BM rows of one 64-wide k tile.
  k.tensor_maps.push_back({param_index(params, ctx.buffer_of(p.node.inputs[0])), SymExpr(0), p.R,
                           p.K, p.K * two, t.bm, 64});
  if (one_fused_map(p)) {
    k.tensor_maps.push_back(
        {weights[0], SymExpr(0), SymExpr(p.experts) * p.N, p.K, p.K * two, t.bn, 64});
  } else {
    for (int64_t e = 0; e < p.experts; ++e) {
      const int param = weights[p.fused ? 0 : e];
      const SymExpr at = p.fused ? SymExpr(e) * p.K * p.N * two : SymExpr(0);
      if (p.kn)  // N-major: boxes of 64 K rows of 64 columns
        k.tensor_maps.push_back({param, at, p.K, p.N, p.N * two, 64, 64});
      else
        k.tensor_maps.push_back({param, at, p.N, p.K, p.K * two, t.bn, 64});
    }
  }
  k.summary = "%" + std::to_string(p.node.output) + " = grouped_mm over " + E + " experts (" +
              (p.fused ? "fused weight" : "per-expert weights") + ", " + (p.kn ? "kn" : "nk") +
              "), N=" + p.N.to_string() + " K=" + p.K.to_string() + " [wgmma " +
              std::to_string(t.bm) + "x" + std::to_string(t.bn) + "x64, " +
              std::to_string(kStages) + " stages" + (p.kn ? ", B N-major" : "") + ", " +
              std::to_string(k.tensor_maps.size()) + " tensor maps], worst-case grid over offsets";
  // No rows, no launch (and no map over zero rows, which the driver refuses).
  const SymExpr any_rows = min(p.R, SymExpr(1));
  k.grid = {ceildiv(p.R, SymExpr(t.bm)) + SymExpr(p.experts + 1) * any_rows,
            ceildiv(p.N, SymExpr(t.bn)), SymExpr(1)};
  k.block = {t.threads(), 1, 1};
  k.shared_bytes = t.smem_bytes();
  k.buffers = params.buffers();
  k.aligned_only = true;  // the output's pairs; TMA checks the operands
  k.checked_operands = params.checked_operands();

  std::string map_params;
  for (size_t i = 0; i < k.tensor_maps.size(); ++i)
    map_params += ", const __grid_constant__ DgTensorMap dg_map" + std::to_string(i);
  const std::string BM = std::to_string(t.bm), BN = std::to_string(t.bn);
  // A minimum of one block per SM: ptxas then knows the register count at entry, which setmaxnreg
  // needs (Note [Warpgroup register counts] in dg_wgmma_sm90.cuh).
  std::string src = "#include \"dg_grouped_sm90.cuh\"\nextern \"C\" __global__ void ";
  src += "__launch_bounds__(" + std::to_string(t.threads()) + ", 1) " + name + "(" +
         params.declaration() + map_params + ctx.symbol_params() + ") {\n";
  src += "  typedef DgWgmmaTile<" + BM + ", " + BN + ", " + std::to_string(kStages) + ", 1" +
         (p.kn ? ", true" : "") + "> Tile;\n";
  src += "  const long long R = " + c_expr(p.R) + ", N = " + c_expr(p.N) + ", K = " + c_expr(p.K) +
         ";\n  long long m0 = 0, m_end = 0;\n";
  src += "  const int e = dg_grouped_tile_by_warp<" + E + ">(" + offs +
         ", R, blockIdx.x, Tile::BM, &m0, &m_end);\n";
  src += "  const long long n0 = (long long)blockIdx.y * Tile::BN;\n";
  src += "  if (e < 0 || n0 >= N) return;  // a surplus tile\n" + weight_map_code(p);
  src += "  // The rows past offs[E-1] (e = E): no k tiles, zeros.\n";
  src += "  dg_grouped_wgmma_tile<Tile>(" + o + ", &dg_map0, b_map, b_n0, m0, m_end, n0, N, e < " +
         E + " ? K : 0);\n}\n";
  ctx.add_kernel(std::move(k), src);
}

}  // namespace dg
