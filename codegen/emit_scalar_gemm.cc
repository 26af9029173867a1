// GEMMs on the scalar tile: CUDA cores, any dtype, strides and batch dims.
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/gemm_snippets.h"
#include "codegen/scalar_gemm.h"

namespace dg {

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

namespace {

// `name[index]` in the accumulator type `acc`, through the operand's own dtype when a cast is
// fused in.
std::string operand_load(const GemmOperandRef& op, const std::string& name,
                         const std::string& index, const std::string& acc) {
  std::string v = name + "[" + index + "]";
  if (op.value_dtype != op.load_dtype) v = "dg_convert<" + ctype(op.value_dtype) + ">(" + v + ")";
  return "dg_convert<" + acc + ">(" + v + ")";
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

// The A and B tiles in shared memory, [k][m] and [k][n], padded by a column.
std::string scalar_shared(const GemmKernelSpec& spec) {
  const std::string acc = compute_ctype(spec.acc_dtype);
  std::string smem = "  __shared__ " + acc + " As[16][64 + 1];\n";
  for (size_t j = 0; j < spec.b.size(); ++j)
    smem += "  __shared__ " + acc + " Bs" + std::to_string(j) + "[16][64 + 1];\n";
  return smem;
}

}  // namespace

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

void emit_scalar_gemm(LoweringContext& ctx, GemmKernelSpec& spec) {
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

}  // namespace dg
