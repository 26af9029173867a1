// Lowering of topk (Note [Top-k op] in ir/shape_infer.cc): one kernel, one thread per row, the K
// best positions kept in registers (dg_topk_row in codegen/device/dg_topk.cuh). The rows are the
// leading dims flattened; the row length is a runtime extent. A router's rows are short (64
// experts), so a thread per row reads its row in a few cache lines and needs no communication.
#include "codegen/c_expr.h"
#include "codegen/lowering.h"
#include "ir/shape_infer.h"

namespace dg {

namespace {
// Fewer threads per block than the pointwise kernels': the row count is the token count, often a
// few thousand, and smaller blocks spread those rows over more SMs.
constexpr int kTopkBlock = 128;
}  // namespace

void emit_topk(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  const TensorType& in = g.tensor(node.inputs[0]);
  const int64_t k = *node.attrs.get_int("k");
  if (k < 1 || k > kTopkMaxK) throw std::invalid_argument("topk with k = " + std::to_string(k));
  const SymExpr len = in.shape.back();
  std::vector<SymExpr> row_shape(in.shape.begin(), in.shape.end() - 1);
  const SymExpr rows = TensorType{in.dtype, row_shape}.numel();

  KernelLaunch launch;
  launch.name = ctx.kernel_name("topk");
  launch.summary = "%" + std::to_string(node.output) + " = top " + std::to_string(k) + " of " +
                   len.to_string() + " in " + rows.to_string() + " rows, a thread per row";
  launch.grid = grid_for(rows, kTopkBlock);
  launch.block = {kTopkBlock, 1, 1};
  launch.buffers = {ctx.buffer_of(node.output), ctx.buffer_of(node.inputs[0])};
  const std::string block = std::to_string(kTopkBlock);
  std::string src =
      "#include \"dg_topk.cuh\"\nextern \"C\" __global__ void __launch_bounds__(" + block + ") " +
      launch.name + "(long long* __restrict__ out, const " + ctype(in.dtype) + "* __restrict__ p0" +
      ctx.symbol_params() + ") {\n" + "  const long long n = " + c_expr(rows) +
      ", len = " + c_expr(len) + ";\n" +
      "  for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < n;\n" +
      "       r += (long long)gridDim.x * blockDim.x)\n" + "    dg_topk_row<" + std::to_string(k) +
      ">(p0 + r * len, len, out + r * " + std::to_string(k) + ");\n}\n";
  ctx.add_kernel(std::move(launch), src);
}

}  // namespace dg
