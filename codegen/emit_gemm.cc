// GEMM kernels for fusion groups and plain linear / matmul nodes: the tensor-core template of
// dg_gemm.cuh where the operands allow it (Note [Tensor-core GEMM]), the scalar tile otherwise.
#include <algorithm>
#include <optional>
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/gemm.h"
#include "codegen/tile_choice.h"

namespace dg {

int KernelParams::position(BufferRef buffer, DType dtype, bool output) {
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i] == buffer) return static_cast<int>(i);
  std::string name = (output ? "o" : "p") + std::to_string(buffers_.size());
  buffers_.push_back(buffer);
  names_.push_back(name);
  decls_.push_back((output ? "" : "const ") + ctype(dtype) + "* __restrict__ " + name);
  return static_cast<int>(buffers_.size()) - 1;
}

std::string KernelParams::add(BufferRef buffer, DType dtype, bool output) {
  return names_[position(buffer, dtype, output)];
}

std::string KernelParams::add_checked(BufferRef buffer, DType dtype, const SymExpr& offset) {
  const int param = position(buffer, dtype, false);
  const CheckedOperand checked{param, offset * SymExpr(dtype_size(dtype))};
  if (std::find(checked_.begin(), checked_.end(), checked) == checked_.end())
    checked_.push_back(checked);
  return names_[param] + " + " + c_expr(offset);
}

void KernelParams::check_paired_output(BufferRef buffer, DType dtype) {
  const CheckedOperand checked{position(buffer, dtype, true), SymExpr(0),
                               2 * static_cast<int>(dtype_size(dtype)), true};
  if (std::find(checked_.begin(), checked_.end(), checked) == checked_.end())
    checked_.push_back(checked);
}

std::string KernelParams::declaration() const {
  std::string s;
  for (size_t i = 0; i < decls_.size(); ++i) s += (i ? ", " : "") + decls_[i];
  return s;
}

namespace {

bool multiple_of_8(const SymExpr& e) { return e.divisor() % 8 == 0; }  // divisor(0) == 0

// Tensor-core operand layout: AT / BKN of dg_gemm_tc and the leading dimension.
struct TcLayout {
  bool transposed = false;
  SymExpr ld;
};

// A (m, k): k contiguous (AT = false) or m contiguous (AT = true). B (k, n): k contiguous
// (BKN = false) or n contiguous (BKN = true). The contiguous extent must be a multiple of 8.
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

std::string operand_load(const GemmOperandRef& op, const std::string& name,
                         const std::string& index, const std::string& acc) {
  std::string v = name + "[" + index + "]";
  if (op.value_dtype != op.load_dtype) v = "dg_convert<" + ctype(op.value_dtype) + ">(" + v + ")";
  return "dg_convert<" + acc + ">(" + v + ")";
}

}  // namespace

std::string epilogue_lambda(const GemmKernelSpec& spec, const std::string& acc,
                            const std::string& name, bool staged) {
  // The products' values at (row, col), first in the body: from the staged registers
  // (dg_gemm_epilogue_rank passes them) or read from global memory.
  std::string accessors, values;
  for (size_t i = 0; i < spec.products.size(); ++i) {
    const EpilogueProduct& p = spec.products[i];
    const std::string k = std::to_string(p.k);
    if (staged) {
      values += "    const float " + p.name + " = dg_rank[" + std::to_string(i) + "];\n";
      continue;
    }
    accessors += "  const auto " + p.name + "_t = dg_rank_rows<" + p.ct + ", " + k + ">(" + p.t +
                 ");\n  const auto " + p.name + "_w = dg_rank_cols<" + p.ct + ", " + k + ", " +
                 (p.linear_weight ? "true" : "false") + ">(" + p.w + ", " +
                 (p.linear_weight ? "0" : p.w_ld) + ");\n";
    values += "    const " + p.ct + " " + p.name + " = dg_rank_product<" + p.ct + ", " + k + ">(" +
              p.name + "_t, row, " + p.name + "_w, col);\n";
  }
  std::string s = accessors + "  auto " + name + " = [&](long long row, int col, " + acc + " acc0";
  if (spec.b.size() == 2) s += ", " + acc + " acc1";
  if (staged) s += ", const float (&dg_rank)[" + std::to_string(spec.products.size()) + "]";
  return s + ", const auto& dg_st) {\n" + values + spec.epilogue + "  };\n";
}

namespace {
// DgPairBits's types (codegen/device/dg_store.cuh); others are stored element by element.
bool pairable(const EpilogueStore& s) {
  return s.dtype == DType::kBF16 || s.dtype == DType::kF16 || s.dtype == DType::kF32;
}
}  // namespace

bool pairs_outputs(const GemmKernelSpec& spec) {
  const std::optional<int64_t> n = spec.N.as_const();
  if (!n || *n % 2 != 0) return false;
  return std::any_of(spec.stores.begin(), spec.stores.end(), pairable);
}

std::string epilogue_stores(const GemmKernelSpec& spec, KernelParams& params, bool pair) {
  if (!pair || !pairs_outputs(spec)) return "  DgDirectStores dg_stores;\n";
  for (const EpilogueStore& s : spec.stores)
    if (pairable(s)) params.check_paired_output(s.buffer, s.dtype);
  return "  DgPairs<" + std::to_string(spec.stores.size()) + "> dg_stores;\n";
}

namespace {

std::string tile_template(const TileConfig& t) {
  return "DgGemmTile<" + std::to_string(t.bm) + ", " + std::to_string(t.bn) + ", " +
         std::to_string(t.bk) + ", " + std::to_string(t.warps_m) + ", " +
         std::to_string(t.warps_n) + ", " + std::to_string(t.stages) + ">";
}

std::string tc_tag(const TileConfig& t) {
  return "[tensor cores " + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "x" +
         std::to_string(t.bk) + ", " + std::to_string(t.stages) + " stages";
}

// A variant kernel's name after its GEMM's first: "_tile32x64".
std::string variant_suffix(const TileConfig& t) {
  return "_tile" + std::to_string(t.bm) + "x" + std::to_string(t.bn);
}

// ", for M <= 512" when the GEMM has several variants (Note [Tile choice]).
std::string range_tag(const std::vector<TileVariant>& variants, size_t v) {
  return variants.size() == 1 ? "" : ", " + variant_range_text(variants[v]);
}

// The launch of variant v of a GEMM whose first kernel is named `base`: its name, tile grid over
// M x N, `z` blocks on gridDim.z for the calls that run it (none for the others), its threads.
KernelLaunch variant_launch(const std::string& base, const std::vector<TileVariant>& variants,
                            size_t v, const SymExpr& M, const SymExpr& N, const SymExpr& z,
                            int threads) {
  const TileConfig& t = variants[v].tile;
  KernelLaunch launch;
  launch.name = v == 0 ? base : base + variant_suffix(t);
  launch.variant = static_cast<int>(v);
  if (variants.size() > 1) launch.runs = variant_selector(M, variants[v]);
  launch.grid = {ceildiv(M, SymExpr(t.bm)), ceildiv(N, SymExpr(t.bn)), z * launch.runs};
  launch.block = {threads, 1, 1};
  return launch;
}

// Note [Staged rank-r epilogue] (codegen/device/dg_epilogue.cuh): where each product's copies go
// in the main loop's shared memory, in floats from its start; nullopt when there are no products,
// one is not f32 or has another K than the first, or the copies do not fit.
std::optional<std::vector<int64_t>> rank_staging(const std::vector<EpilogueProduct>& products,
                                                 const TileConfig& t, bool at, bool bkn, int nb) {
  if (products.empty()) return std::nullopt;
  const int64_t a = at ? t.bk * (t.bm + 8) : t.bm * (t.bk + 8);
  const int64_t b = bkn ? t.bk * (t.bn + 8) : t.bn * (t.bk + 8);
  const int64_t floats = int64_t{2} * t.stages * (a + nb * b) / 4;  // bf16 elements to floats
  std::vector<int64_t> offsets;
  int64_t used = 0;
  for (const EpilogueProduct& p : products) {
    if (p.ct != "float" || p.k != products[0].k) return std::nullopt;
    offsets.push_back(used);
    used += t.bm * (p.k + 1) + p.k * (t.bn + 1);
  }
  if (used > floats) return std::nullopt;
  return offsets;
}

// A static check that a problem's staged copies fit the main loop's shared memory.
std::string scratch_fits(const std::vector<EpilogueProduct>& products,
                         const std::vector<int64_t>& offsets, const std::string& tile_args) {
  const EpilogueProduct& last = products.back();
  const std::string floats = std::to_string(offsets.back()) + " + Tile::BM * " +
                             std::to_string(last.k + 1) + " + " + std::to_string(last.k) +
                             " * (Tile::BN + 1)";
  return "  static_assert(4 * (" + floats + ") <= 2 * Tile::kStages * DgGemmStageCopies<" +
         tile_args + ">::kStage, \"the staged rank-r operands fit the main loop's stages\");\n";
}

// The scratch for staged copies: the main loop's shared memory, as floats.
std::string scratch_pointer(const std::string& tile_args) {
  return "  float* const dg_scratch = reinterpret_cast<float*>(dg_gemm_smem<" + tile_args +
         ">());\n";
}

// The epilogue over the block's accumulators, its stores declared first (epilogue_stores): with
// the staged products' values in registers (after rank_staging_code) or plain.
std::string epilogue_call(const GemmKernelSpec& spec, KernelParams& params, bool staged,
                          const std::string& epi, bool pair = true) {
  const std::string nb = std::to_string(spec.b.size());
  const std::string stores = epilogue_stores(spec, params, pair);
  if (!staged)
    return stores + "  dg_gemm_epilogue<Tile, " + nb + ">(acc, m0, M, n0, N, " + epi +
           ", dg_stores);\n";
  return stores + "  dg_gemm_epilogue_rank<Tile, " + nb + ", " +
         std::to_string(spec.products.size()) + ", " + std::to_string(spec.products[0].k) +
         ">(acc, m0, M, n0, N, dg_rank_at, " + epi + ", dg_stores);\n";
}

std::string tc_tile_args(bool at, bool bkn, int nb) {
  return std::string("Tile, ") + (at ? "true" : "false") + ", " + (bkn ? "true" : "false") + ", " +
         std::to_string(nb);
}

}  // namespace

std::string rank_staging_code(const std::vector<EpilogueProduct>& products,
                              const std::vector<int64_t>& offsets) {
  std::string s;
  for (size_t i = 0; i < products.size(); ++i) {
    const EpilogueProduct& p = products[i];
    const std::string k = std::to_string(p.k), k1 = std::to_string(p.k + 1);
    s += "  {  // " + p.name + ": the block's rows of U and columns of B\n";
    s += "    float* const u = dg_scratch + " + std::to_string(offsets[i]) + ";\n";
    s += "    for (int e = threadIdx.x; e < Tile::BM * " + k + "; e += Tile::kThreads) {\n";
    s += "      const int r = e / " + k + ", j = e % " + k + ";\n";
    s += "      u[r * " + k1 + " + j] = m0 + r < M ? dg_convert<float>(" + p.t + "[(m0 + r) * " +
         k + " + j]) : 0.0f;\n    }\n";
    s += "    float* const w = u + Tile::BM * " + k1 + ";\n";
    s += "    for (int e = threadIdx.x; e < " + k + " * Tile::BN; e += Tile::kThreads) {\n";
    // Consecutive threads read consecutive elements of w.
    s += p.linear_weight ? "      const int c = e / " + k + ", j = e % " + k + ";\n"
                         : "      const int j = e / Tile::BN, c = e % Tile::BN;\n";
    const std::string w_at =
        p.linear_weight ? "(n0 + c) * " + k + " + j" : "j * " + p.w_ld + " + n0 + c";
    s += "      w[j * (Tile::BN + 1) + c] = n0 + c < N ? dg_convert<float>(" + p.w + "[" + w_at +
         "]) : 0.0f;\n    }\n  }\n";
  }
  s += "  __syncthreads();\n  const float* const dg_rank_at[" + std::to_string(products.size()) +
       "] = {";
  for (size_t i = 0; i < offsets.size(); ++i)
    s += (i ? ", " : "") + std::string("dg_scratch + ") + std::to_string(offsets[i]);
  return s + "};\n";
}

std::string kernel_header(const std::string& name, int threads, const KernelParams& params,
                          const LoweringContext& ctx) {
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(threads) + ") " + name +
         "(" + params.declaration() + ctx.symbol_params() + ") {\n";
}

namespace {

// The block's tile origin (m0, n0) and its zeroed tensor-core accumulators; blocks past M or N
// return (uniform over the block).
std::string tc_block_setup(const std::string& nb) {
  return "  const long long m0 = (long long)blockIdx.x * Tile::BM;\n"
         "  const long long n0 = (long long)blockIdx.y * Tile::BN;\n"
         "  if (m0 >= M || n0 >= N) return;\n"
         "  float acc[" +
         nb +
         "][Tile::MT][Tile::NT][4];\n"
         "  DG_UNROLL\n  for (int j = 0; j < " +
         nb +
         "; ++j)\n"
         "    DG_UNROLL\n    for (int mt = 0; mt < Tile::MT; ++mt)\n"
         "      DG_UNROLL\n      for (int nt = 0; nt < Tile::NT; ++nt)\n"
         "        DG_UNROLL\n        for (int i = 0; i < 4; ++i) acc[j][mt][nt][i] = 0.0f;\n";
}

std::string tc_mainloop(const std::string& nb, bool at, bool bkn, const std::string& a,
                        const std::string& lda, const std::string& b, const std::string& ldb,
                        const std::string& K, bool aligned_only) {
  return "  {\n    const dg_bf16* const b[" + nb + "] = {" + b + "};\n" +
         "    dg_gemm_mainloop<Tile, " + (at ? "true" : "false") + ", " + (bkn ? "true" : "false") +
         ", " + nb + (aligned_only ? ", true" : "") + ">(acc, " + a + ", " + lda + ", b, " + ldb +
         ", m0, M, n0, N, 0, " + K + ");\n  }\n";
}

// The kernel of a tensor-core GEMM: its block's mainloop, once per K segment into the same
// accumulators, then the epilogue (Note [Tensor-core GEMM] in dg_gemm.cuh), its rank-r products'
// operands staged in shared memory at `staged` (rank_staging's offsets) when it has a value. The
// GEMM's fallback kernel (Note [GEMM fallbacks]) loads and stores element by element where
// addresses need it; the other kernels read 16-byte aligned operands only and store their outputs
// in pairs where pairs_outputs allows it (Note [Paired stores]).
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
  return kernel_header(name, 32 * t.warps_m * t.warps_n, spec.params, ctx) + "  typedef " +
         tile_template(t) + " Tile;\n" + "  const long long M = " + c_expr(spec.M) +
         ", N = " + c_expr(spec.N) + ";\n" + "  const long long c_base = 0;\n" +
         (staged ? scratch_fits(spec.products, *staged, tile_args) + scratch_pointer(tile_args)
                 : "") +
         epilogue_lambda(spec, "float", "epi", staged.has_value()) + tc_block_setup(NB) + loops +
         (staged ? rank_staging_code(spec.products, *staged) : "") + epilogue + "}\n";
}

void emit_tensor_core(LoweringContext& ctx, GemmKernelSpec& spec) {
  const int nb = static_cast<int>(spec.b.size());
  const std::vector<TileVariant> variants = tile_variants(spec.M, *spec.N.as_const(), nb);
  const std::string base = ctx.kernel_name(spec.what);
  for (size_t v = 0; v < variants.size(); ++v) {
    const TileConfig& t = variants[v].tile;
    emit_mma_sync_kernel(
        ctx, spec,
        variant_launch(base, variants, v, spec.M, spec.N, SymExpr(1), 32 * t.warps_m * t.warps_n),
        t, range_tag(variants, v));
  }
  emit_gemm_fallback(ctx, spec, base, static_cast<int>(variants.size()));
}

// Loads one 64 x 16 operand tile into shared memory, converting to the accumulator type; the
// faster-varying index follows the unit stride. A tile: dst[k][m]; B tile: dst[k][n].
std::string tile_load(const std::string& dst, const std::string& src, const std::string& base,
                      const std::string& acc, const GemmOperandRef& op, bool is_a) {
  bool k_fastest = is_a ? op.col_stride == SymExpr(1) : op.row_stride == SymExpr(1);
  std::string s = "    for (int e = threadIdx.x; e < 64 * 16; e += 256) {\n";
  if (k_fastest)
    s += "      const int kk = e % 16, o = e / 16;\n";
  else
    s += "      const int kk = e / 64, o = e % 64;\n";
  std::string oi = is_a ? "m0 + o" : "n0 + o";
  std::string off =
      is_a ? "(" + oi + ") * " + c_expr(op.row_stride) + " + (k0 + kk) * " + c_expr(op.col_stride)
           : "(k0 + kk) * " + c_expr(op.row_stride) + " + (" + oi + ") * " + c_expr(op.col_stride);
  std::string bound = is_a ? "m0 + o < M" : "n0 + o < N";
  s += "      " + dst + "[kk][o] = (" + bound + " && k0 + kk < K) ? " +
       operand_load(op, src, base + " + " + off, acc) + " : (" + acc + ")0;\n    }\n";
  return s;
}

// Note [Simple GEMM]
// A 64x64 output tile per block, K in steps of 16 through shared memory, 256 threads each owning
// a 4x4 micro-tile (per B operand), fp32 accumulation (fp64 for f64) and one rounding at the end,
// as PyTorch does (f32 GEMMs stay fp32 on CUDA cores: no TF32). Operands are read through
// strides, so x . W^T, transposed operands and views need no copies; a fused cast converts in the
// loads. Tiles are predicated on M, N and K, which may all be symbolic; K = 0 gives zeros (+ bias).
// Batch dims run over blockIdx.z, looped past its limit (Note [Grid limits]). This is the
// correct-everywhere path for what the tensor-core kernel cannot take.
//
// Note [Grid limits]
// M (the token count) is unbounded, so GEMM tiles of M go on gridDim.x (2^31 - 1 blocks); N is a
// weight dim, on gridDim.y (65,535 tiles); batches beyond gridDim.z's 65,535 are looped over
// inside the kernel.
// Where the scalar tile reads its operands: pointer expressions, and the offsets of element
// (0, 0) of A and of each B (the spec's strides apply).
struct ScalarOperands {
  std::string a, a_base;
  std::vector<std::string> b, b_base;
};

std::string scalar_shared(const GemmKernelSpec& spec) {
  const std::string acc = compute_ctype(spec.acc_dtype);
  std::string smem = "  __shared__ " + acc + " As[16][64 + 1];\n";
  for (size_t j = 0; j < spec.b.size(); ++j)
    smem += "  __shared__ " + acc + " Bs" + std::to_string(j) + "[16][64 + 1];\n";
  return smem;
}

// The epilogue lambda and the calls for the thread's 4x4 micro-tile, in the scalar tile's scope.
std::string scalar_stores(const GemmKernelSpec& spec) {
  std::string call_args;
  for (size_t j = 0; j < spec.b.size(); ++j) call_args += ", c" + std::to_string(j) + "[i][j]";
  return epilogue_lambda(spec, compute_ctype(spec.acc_dtype)) +
         "  DG_UNROLL for (int i = 0; i < 4; ++i) {\n"
         "    const long long row = m0 + ty + 16 * i;\n"
         "    if (row >= M) continue;\n"
         "    DG_UNROLL for (int j = 0; j < 4; ++j) {\n"
         "      const long long col = n0 + tx + 16 * j;\n"
         "      if (col < N) epi(row, (int)col" +
         call_args +
         ", DgDirectStores{});\n"
         "    }\n"
         "  }\n";
}

// The scalar tile's code (Note [Simple GEMM]): the spec's shape, strides and dtypes, its shared
// memory at function scope, operands read through `ops`, then `stores` with the accumulators c<j>
// in scope. K segments add their buffers to `params`.
std::string scalar_body(const GemmKernelSpec& spec, const ScalarOperands& ops,
                        const std::string& stores, KernelParams& params) {
  const std::string acc = compute_ctype(spec.acc_dtype);
  const size_t nb = spec.b.size();
  SymExpr batch = TensorType{DType::kF32, spec.batch}.numel();
  std::string bases = "  long long a_base = " + ops.a_base + ";\n";
  for (size_t j = 0; j < nb; ++j)
    bases += "  long long b_base" + std::to_string(j) + " = " + ops.b_base[j] + ";\n";
  if (!spec.batch.empty()) {
    bases += "  {\n" + unravel(spec.batch, "bz");
    bases += "    a_base += " + offset_expr(spec.a.batch_strides) + ";\n";
    for (size_t j = 0; j < nb; ++j)
      bases +=
          "    b_base" + std::to_string(j) + " += " + offset_expr(spec.b[j].batch_strides) + ";\n";
    bases += "  }\n";
  }
  std::string loads = tile_load("As", ops.a, "a_base", acc, spec.a, true);
  std::string fma, decl;
  for (size_t j = 0; j < nb; ++j) {
    std::string J = std::to_string(j);
    loads += tile_load("Bs" + J, ops.b[j], "b_base" + J, acc, spec.b[j], false);
    decl += "  " + acc + " c" + J + "[4][4] = {};\n";
    fma +=
        "      DG_UNROLL for (int j = 0; j < 4; ++j) {\n"
        "        const " +
        acc + " bv = Bs" + J +
        "[kk][tx + 16 * j];\n"
        "        DG_UNROLL for (int i = 0; i < 4; ++i) c" +
        J + "[i][j] += av[i] * bv;\n      }\n";
  }
  const std::string k_body =
      "    __syncthreads();\n"
      "    DG_UNROLL for (int kk = 0; kk < 16; ++kk) {\n"
      "      " +
      acc +
      " av[4];\n"
      "      DG_UNROLL for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];\n" +
      fma +
      "    }\n"
      "    __syncthreads();\n";
  std::string k_loops = "  for (long long k0 = 0; k0 < K; k0 += 16) {\n" + loads + k_body + "  }\n";
  if (!spec.k_segments.empty()) {  // one K loop per segment, into the same accumulators
    if (!spec.batch.empty()) throw std::logic_error("a batched GEMM over K segments");
    k_loops.clear();
    for (const GemmKSegment& seg : spec.k_segments) {
      std::string seg_loads = tile_load("As", params.add(seg.a.buffer, seg.a.load_dtype, false),
                                        "a_base", acc, seg.a, true);
      std::string seg_bases = "    const long long a_base = " + c_expr(seg.a.offset) + ";\n";
      for (size_t j = 0; j < nb; ++j) {
        std::string J = std::to_string(j);
        seg_loads += tile_load("Bs" + J, params.add(seg.b[j].buffer, seg.b[j].load_dtype, false),
                               "b_base" + J, acc, seg.b[j], false);
        seg_bases += "    const long long b_base" + J + " = " + c_expr(seg.b[j].offset) + ";\n";
      }
      k_loops += "  {\n    const long long K = " + c_expr(seg.K) + ";\n" + seg_bases +
                 "    for (long long k0 = 0; k0 < K; k0 += 16) {\n" + seg_loads + k_body +
                 "    }\n  }\n";
    }
  }
  // Only a batched GEMM loops over blockIdx.z (Note [Grid limits]); the loop's induction
  // variable alone made the unbatched fused kernels spill.
  const bool batched = !spec.batch.empty();
  const std::string batch_open =
      batched ? "  for (long long bz = blockIdx.z; bz < " + c_expr(batch) + "; bz += gridDim.z) {\n"
              : "";
  return "  const long long M = " + c_expr(spec.M) + ", N = " + c_expr(spec.N) +
         ", K = " + c_expr(spec.K) + ";\n" + scalar_shared(spec) + batch_open + bases +
         "  const long long c_base = " + (batched ? "bz * M * N" : "0") +
         ";\n"
         "  const long long m0 = (long long)blockIdx.x * 64, n0 = (long long)blockIdx.y * 64;\n"
         "  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;\n" +
         decl + k_loops + stores + (batched ? "  }\n" : "");
}

void emit_scalar(LoweringContext& ctx, GemmKernelSpec& spec) {
  SymExpr batch = TensorType{DType::kF32, spec.batch}.numel();
  KernelLaunch launch;
  launch.name = ctx.kernel_name(spec.what);
  launch.summary = spec.summary + " [scalar tile 64x64]";
  launch.grid = {ceildiv(spec.M, SymExpr(64)), ceildiv(spec.N, SymExpr(64)),
                 min(batch, SymExpr(65535))};
  launch.block = {256, 1, 1};
  launch.nodes = spec.nodes;
  ScalarOperands ops;
  ops.a = spec.params.add(spec.a.buffer, spec.a.load_dtype, false);
  ops.a_base = c_expr(spec.a.offset);
  for (const GemmOperandRef& b : spec.b) {
    ops.b.push_back(spec.params.add(b.buffer, b.load_dtype, false));
    ops.b_base.push_back(c_expr(b.offset));
  }
  std::string body = scalar_body(spec, ops, scalar_stores(spec), spec.params);
  std::string src = kernel_header(launch.name, 256, spec.params, ctx) + body + "}\n";
  launch.buffers = spec.params.buffers();
  ctx.add_kernel(std::move(launch), src);
}

}  // namespace

std::vector<GemmKSegment> k_segments_or_whole(const GemmKernelSpec& spec) {
  if (!spec.k_segments.empty()) return spec.k_segments;
  return {GemmKSegment{spec.a, spec.b, spec.K}};
}

TcTransposes tc_transposes(const GemmKernelSpec& spec) {
  const SymExpr& k0 = spec.k_segments.empty() ? spec.K : spec.k_segments[0].K;
  return {tc_layout(spec.a, spec.M, k0, false)->transposed,
          tc_layout(spec.b[0], k0, spec.N, true)->transposed};
}

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
  // whose operands or outputs are off (their checks: 16-byte reads, pairs' writes).
  launch.aligned_only = !launch.fallback;
  for (const CheckedOperand& c : spec.params.checked_operands())  // the variants share params
    if (launch.aligned_only || !c.written) launch.checked_operands.push_back(c);
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
  launch.block = {32 * t.warps_m * t.warps_n, 1, 1};
  emit_mma_sync_kernel(ctx, spec, std::move(launch), t,
                       ", fallback for a call whose addresses or tensor maps the others refuse");
}

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
    return emit_tensor_core(ctx, spec);
  }
  if (rank_gemm_eligible(spec)) {
    KernelParams params = std::move(spec.params);
    return emit_rank_gemm(ctx, {spec}, std::move(params));
  }
  emit_scalar(ctx, spec);
}

namespace {

// The kernel a spec lowers to, as text: the tile (kind and size), M, N and K, and what the shared
// mainloop spells into its code (the operands' dtypes and, on the scalar tile, their strides;
// the tensor-core mainloop takes its leading dimensions at run time). Empty when the spec cannot
// be one problem of a grouped kernel (K segments, batch dims).
std::string grouping_key(const GemmKernelSpec& spec) {
  if (!spec.k_segments.empty() || !spec.batch.empty()) return "";
  std::string key = " nb=" + std::to_string(spec.b.size()) + " M=" + spec.M.to_string() +
                    " N=" + spec.N.to_string() + " K=" + spec.K.to_string();
  if (tensor_core_eligible(spec)) {
    std::string tiles;
    for (const TileVariant& v :
         tile_variants(spec.M, *spec.N.as_const(), static_cast<int>(spec.b.size())))
      tiles += tile_template(v.tile) + " ";
    return "tc " + tiles + (tc_layout(spec.a, spec.M, spec.K, false)->transposed ? " AT" : "") +
           (tc_layout(spec.b[0], spec.K, spec.N, true)->transposed ? " BKN" : "") + key;
  }
  key = "scalar " + compute_ctype(spec.acc_dtype) + key;
  std::vector<const GemmOperandRef*> operands = {&spec.a};
  for (const GemmOperandRef& b : spec.b) operands.push_back(&b);
  for (const GemmOperandRef* op : operands)
    key += " " + ctype(op->load_dtype) + ">" + ctype(op->value_dtype) + "(" +
           op->row_stride.to_string() + ", " + op->col_stride.to_string() + ")";
  return key;
}

}  // namespace

std::string by_problem(const std::vector<std::string>& values) {
  std::string s = values.back();
  for (size_t p = values.size() - 1; p-- > 0;)
    if (values[p] != values.back())
      s = "problem == " + std::to_string(p) + " ? " + values[p] + " : " + s;
  return s == values.back() ? s : "(" + s + ")";
}

std::string indented(const std::string& code) {
  std::string out;
  for (size_t at = 0; at < code.size();) {
    size_t end = code.find('\n', at);
    end = end == std::string::npos ? code.size() : end + 1;
    out += "  " + code.substr(at, end - at);
    at = end;
  }
  return out;
}

std::string branch_by_problem(const std::vector<std::string>& code) {
  std::string s;
  for (size_t p = 0; p < code.size(); ++p) {
    s += p == 0                ? "  if (problem == 0) {\n"
         : p + 1 < code.size() ? "  } else if (problem == " + std::to_string(p) + ") {\n"
                               : "  } else {\n";
    s += indented(code[p]);
  }
  return s + "  }\n";
}

namespace {

std::string node_list(const Graph& g, const std::vector<int>& nodes) {
  std::string s;
  for (int i : nodes)
    s += (s.empty() ? "" : " ") + std::string(op_name(g.nodes[i].op)) + "%" +
         std::to_string(g.nodes[i].output);
  return s;
}

// A grouped kernel on tensor cores: one mainloop over the block's problem's operands, then that
// problem's epilogue.
std::string grouped_tc_source(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                              KernelParams& params, const std::string& name, const TileConfig& t) {
  const GemmKernelSpec& first = problems[0];
  const std::string nb = std::to_string(first.b.size());
  const bool at = tc_layout(first.a, first.M, first.K, false)->transposed;
  const bool bkn = tc_layout(first.b[0], first.K, first.N, true)->transposed;
  std::vector<std::string> a, lda, ldb, epilogues;
  std::vector<std::vector<std::string>> b(first.b.size());
  std::string lambdas, scratch;
  bool has_scratch = false;
  const std::string tile_args = tc_tile_args(at, bkn, static_cast<int>(first.b.size()));
  for (size_t p = 0; p < problems.size(); ++p) {
    const GemmKernelSpec& spec = problems[p];
    a.push_back(params.add_checked(spec.a.buffer, DType::kBF16, spec.a.offset));
    lda.push_back(c_expr(tc_layout(spec.a, spec.M, spec.K, false)->ld));
    ldb.push_back(c_expr(tc_layout(spec.b[0], spec.K, spec.N, true)->ld));
    for (size_t j = 0; j < spec.b.size(); ++j)
      b[j].push_back(params.add_checked(spec.b[j].buffer, DType::kBF16, spec.b[j].offset));
    // Each problem stages its own products from the scratch's start: a block runs one problem.
    const auto staged = rank_staging(spec.products, t, at, bkn, static_cast<int>(spec.b.size()));
    if (staged) scratch += scratch_fits(spec.products, *staged, tile_args);
    if (staged && !has_scratch) scratch += scratch_pointer(tile_args);
    has_scratch = has_scratch || staged;
    const std::string epi = "epi" + std::to_string(p);
    lambdas += epilogue_lambda(spec, "float", epi, staged.has_value());
    epilogues.push_back((staged ? rank_staging_code(spec.products, *staged) : "") +
                        // No fallback kernel here: a grouped GEMM takes any address itself.
                        epilogue_call(spec, params, staged.has_value(), epi, false));
  }
  std::string bs;
  for (const std::vector<std::string>& bj : b) bs += (bs.empty() ? "" : ", ") + by_problem(bj);
  return kernel_header(name, 32 * t.warps_m * t.warps_n, params, ctx) + "  typedef " +
         tile_template(t) + " Tile;\n  const unsigned problem = blockIdx.z;\n" +
         "  const long long M = " + c_expr(first.M) + ", N = " + c_expr(first.N) + ";\n" +
         "  const long long c_base = 0;\n" + scratch + lambdas + tc_block_setup(nb) +
         tc_mainloop(nb, at, bkn, by_problem(a), by_problem(lda), bs, by_problem(ldb),
                     c_expr(first.K), false) +
         branch_by_problem(epilogues) + "}\n";
}

// A grouped kernel on the scalar tile: one K loop over the block's problem's operands (the
// problems share strides and dtypes), then that problem's epilogue and stores.
std::string grouped_scalar_source(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                                  KernelParams& params, const std::string& name) {
  const GemmKernelSpec& first = problems[0];
  std::vector<std::string> a, a_base, stores;
  std::vector<std::vector<std::string>> b(first.b.size()), b_base(first.b.size());
  for (const GemmKernelSpec& spec : problems) {
    a.push_back(params.add(spec.a.buffer, spec.a.load_dtype, false));
    a_base.push_back(c_expr(spec.a.offset));
    for (size_t j = 0; j < spec.b.size(); ++j) {
      b[j].push_back(params.add(spec.b[j].buffer, spec.b[j].load_dtype, false));
      b_base[j].push_back(c_expr(spec.b[j].offset));
    }
    stores.push_back(scalar_stores(spec));
  }
  std::string pointers = "  const unsigned problem = blockIdx.z;\n  const " +
                         ctype(first.a.load_dtype) + "* const a_ptr = " + by_problem(a) + ";\n";
  ScalarOperands ops{"a_ptr", by_problem(a_base), {}, {}};
  for (size_t j = 0; j < b.size(); ++j) {
    const std::string J = std::to_string(j);
    pointers += "  const " + ctype(first.b[j].load_dtype) + "* const b_ptr" + J + " = " +
                by_problem(b[j]) + ";\n";
    ops.b.push_back("b_ptr" + J);
    ops.b_base.push_back(by_problem(b_base[j]));
  }
  return kernel_header(name, 256, params, ctx) + pointers +
         scalar_body(first, ops, branch_by_problem(stores), params) + "}\n";
}

}  // namespace

bool gemms_share_a_kernel(const std::vector<GemmKernelSpec>& problems) {
  if (problems.empty()) return false;
  const std::string key = grouping_key(problems[0]);
  for (const GemmKernelSpec& p : problems)
    if (key.empty() || grouping_key(p) != key) return false;
  return true;
}

void emit_grouped_gemm(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                       KernelParams params) {
  if (!gemms_share_a_kernel(problems)) throw std::logic_error("GEMMs that cannot share a kernel");
  const GemmKernelSpec& first = problems[0];
  const bool tc = tensor_core_eligible(first);
  if (!tc && std::all_of(problems.begin(), problems.end(), rank_gemm_eligible))
    return emit_rank_gemm(ctx, problems, std::move(params));
  // The scalar tile (Note [Simple GEMM]) is one variant for every M.
  const std::vector<TileVariant> variants =
      tc ? tile_variants(first.M, *first.N.as_const(), static_cast<int>(first.b.size()))
         : std::vector<TileVariant>{{{64, 64, 16, 0, 0, 0}, 0, Interval::kPosInf}};
  std::string summary;
  std::vector<int> nodes;
  for (const GemmKernelSpec& spec : problems) {
    nodes.insert(nodes.end(), spec.nodes.begin(), spec.nodes.end());
    summary += " {" + node_list(ctx.graph(), spec.nodes) + "}";
  }
  const std::string base = ctx.kernel_name("grouped_" + first.what);
  const SymExpr count(static_cast<int64_t>(problems.size()));
  for (size_t v = 0; v < variants.size(); ++v) {
    const TileConfig& t = variants[v].tile;
    // Problem p on blockIdx.z == p.
    KernelLaunch launch = variant_launch(base, variants, v, first.M, first.N, count,
                                         tc ? 32 * t.warps_m * t.warps_n : 256);
    launch.nodes = nodes;
    launch.summary = std::to_string(problems.size()) + " problems on blockIdx.z:" + summary +
                     " M=" + first.M.to_string() + " N=" + first.N.to_string() +
                     " K=" + first.K.to_string() + " " + (tc ? tc_tag(t) : "[scalar tile 64x64") +
                     range_tag(variants, v) + "]";
    KernelParams kernel_params = params;
    std::string src = tc ? grouped_tc_source(ctx, problems, kernel_params, launch.name, t)
                         : grouped_scalar_source(ctx, problems, kernel_params, launch.name);
    launch.buffers = kernel_params.buffers();
    launch.checked_operands = kernel_params.checked_operands();
    ctx.add_kernel(std::move(launch), src);
  }
}

}  // namespace dg
