// Lowering of linear and matmul to one tiled GEMM kernel per node.
//
// Note [Simple GEMM]
// A 64x64 output tile per block, K in steps of 16 through shared memory, 256 threads each owning
// a 4x4 micro-tile, fp32 accumulation (fp64 for f64) and one rounding at the end, as PyTorch
// does. Operands are read through strides, so x . W^T and transposed operands need no copies.
// Tiles are predicated on M, N and K, which may all be symbolic; K = 0 gives zeros (+ bias).
// This is the correct-everywhere baseline that tensor-core kernels are checked against.
#include "codegen/c_expr.h"
#include "codegen/lowering.h"

namespace dg {

namespace {

struct GemmOperand {
  std::vector<SymExpr> batch_strides;  // one per output batch dim
  SymExpr row_stride, col_stride;      // A: (m, k); B: (k, n)
};

// Strides of a [batch..., R, C] operand broadcast against the output's batch dims.
GemmOperand operand_strides(const TensorType& t, const std::vector<SymExpr>& out_batch) {
  std::vector<SymExpr> s = t.contiguous_strides();
  int r = t.rank();
  GemmOperand op{{}, s[r - 2], s[r - 1]};
  std::vector<SymExpr> batch_shape(t.shape.begin(), t.shape.end() - 2);
  std::vector<SymExpr> bs = broadcast_strides(batch_shape, out_batch);
  // broadcast_strides uses the batch sub-shape's own strides; scale them to the full tensor.
  SymExpr matrix = t.shape[r - 2] * t.shape[r - 1];
  for (auto& x : bs) x = x * matrix;
  op.batch_strides = bs;
  return op;
}

// Loads one operand tile into shared memory; the faster-varying index follows the unit stride.
std::string tile_load(const std::string& dst, const std::string& src, const std::string& acc,
                      const GemmOperand& op, bool is_a) {
  // A tile: 64 rows (m) x 16 (k), stored k-major as dst[k][m]. B tile: 16 (k) x 64 (n).
  bool k_fastest = is_a ? op.col_stride == SymExpr(1) : op.row_stride == SymExpr(1);
  std::string outer = is_a ? "m" : "n", base = is_a ? "a_base" : "b_base";
  std::string s = "    for (int e = threadIdx.x; e < 64 * 16; e += 256) {\n";
  if (k_fastest) s += "      const int kk = e % 16, o = e / 16;\n";
  else s += "      const int kk = e / 64, o = e % 64;\n";
  std::string oi = is_a ? "m0 + o" : "n0 + o";
  std::string off = is_a ? "(" + oi + ") * " + c_expr(op.row_stride) + " + (k0 + kk) * " +
                               c_expr(op.col_stride)
                         : "(k0 + kk) * " + c_expr(op.row_stride) + " + (" + oi + ") * " +
                               c_expr(op.col_stride);
  std::string bound = is_a ? "m0 + o < M" : "n0 + o < N";
  s += "      " + dst + "[kk][o] = (" + bound + " && k0 + kk < K) ? dg_convert<" + acc + ">(" +
       src + "[" + base + " + " + off + "]) : (" + acc + ")0;\n    }\n";
  return s;
}

}  // namespace

void emit_matmul_node(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  const TensorType& a_in = g.tensor(node.inputs[0]);
  const TensorType& b_in = g.tensor(node.inputs[1]);
  const TensorType& out = g.tensor(node.output);
  bool has_bias = node.inputs.size() == 3;
  std::string acc = compute_ctype(out.dtype), t = ctype(out.dtype);

  SymExpr M, N, K;
  std::vector<SymExpr> out_batch;
  GemmOperand A, B;
  if (node.op == OpKind::kLinear) {
    // x[..., K] viewed as [M, K]; w[N, K] read transposed.
    K = a_in.shape.back();
    N = b_in.shape[0];
    M = TensorType{a_in.dtype, std::vector<SymExpr>(a_in.shape.begin(), a_in.shape.end() - 1)}
            .numel();
    A = {{}, K, SymExpr(1)};
    B = {{}, SymExpr(1), K};
  } else {
    M = a_in.shape[a_in.rank() - 2];
    K = a_in.shape[a_in.rank() - 1];
    N = b_in.shape[b_in.rank() - 1];
    out_batch.assign(out.shape.begin(), out.shape.end() - 2);
    A = operand_strides(a_in, out_batch);
    B = operand_strides(b_in, out_batch);
  }
  SymExpr batch = TensorType{out.dtype, out_batch}.numel();

  KernelLaunch launch;
  launch.name = ctx.kernel_name(std::string(op_name(node.op)));
  launch.summary = "%" + std::to_string(node.output) + " = " + std::string(op_name(node.op)) +
                   " M=" + M.to_string() + " N=" + N.to_string() + " K=" + K.to_string() +
                   (out_batch.empty() ? "" : " batch=" + batch.to_string());
  // Note [Grid limits]: M (the token count) is unbounded, so its tiles go on gridDim.x (2^31-1
  // blocks); N is a weight dim, on gridDim.y (65,535 tiles); batches beyond gridDim.z's 65,535
  // are looped over inside the kernel.
  launch.grid = {ceildiv(M, SymExpr(64)), ceildiv(N, SymExpr(64)), min(batch, SymExpr(65535))};
  launch.block = {256, 1, 1};
  launch.buffers = {ctx.buffer_of(node.output), ctx.buffer_of(node.inputs[0]),
                    ctx.buffer_of(node.inputs[1])};
  if (has_bias) launch.buffers.push_back(ctx.buffer_of(node.inputs[2]));

  std::string batch_code = "  long long a_base = 0, b_base = 0;\n";
  if (!out_batch.empty()) {
    batch_code += "  {\n" + unravel(out_batch, "bz");
    batch_code += "    a_base = " + offset_expr(A.batch_strides) + ";\n";
    batch_code += "    b_base = " + offset_expr(B.batch_strides) + ";\n  }\n";
  }
  std::string src =
      "extern \"C\" __global__ void __launch_bounds__(256) " + launch.name + "(" + t +
      "* __restrict__ out, const " + t + "* __restrict__ a, const " + t + "* __restrict__ b" +
      (has_bias ? ", const " + t + "* __restrict__ bias" : std::string()) + ctx.symbol_params() +
      ") {\n"
      "  const long long M = " + c_expr(M) + ", N = " + c_expr(N) + ", K = " + c_expr(K) + ";\n"
      "  __shared__ " + acc + " As[16][64 + 1];\n"
      "  __shared__ " + acc + " Bs[16][64 + 1];\n"
      "  for (long long bz = blockIdx.z; bz < " + c_expr(batch) + "; bz += gridDim.z) {\n" +
      batch_code +
      "  const long long c_base = bz * M * N;\n"
      "  const long long m0 = (long long)blockIdx.x * 64, n0 = (long long)blockIdx.y * 64;\n"
      "  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;\n"
      "  " + acc + " c[4][4];\n"
      "  for (int i = 0; i < 4; ++i)\n"
      "    for (int j = 0; j < 4; ++j) c[i][j] = 0;\n"
      "  for (long long k0 = 0; k0 < K; k0 += 16) {\n" +
      tile_load("As", "a", acc, A, true) + tile_load("Bs", "b", acc, B, false) +
      "    __syncthreads();\n"
      "    for (int kk = 0; kk < 16; ++kk) {\n"
      "      " + acc + " av[4], bv[4];\n"
      "      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];\n"
      "      for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];\n"
      "      for (int i = 0; i < 4; ++i)\n"
      "        for (int j = 0; j < 4; ++j) c[i][j] += av[i] * bv[j];\n"
      "    }\n"
      "    __syncthreads();\n"
      "  }\n"
      "  for (int i = 0; i < 4; ++i) {\n"
      "    const long long m = m0 + ty + 16 * i;\n"
      "    if (m >= M) continue;\n"
      "    for (int j = 0; j < 4; ++j) {\n"
      "      const long long n = n0 + tx + 16 * j;\n"
      "      if (n >= N) continue;\n"
      "      " + acc + " v = c[i][j];\n" +
      (has_bias ? "      v += dg_convert<" + acc + ">(bias[n]);\n" : std::string()) +
      "      out[c_base + m * N + n] = dg_convert<" + t + ">(v);\n"
      "    }\n"
      "  }\n"
      "  }\n"
      "}\n";
  ctx.add_kernel(std::move(launch), src);
}

}  // namespace dg
