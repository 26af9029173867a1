// Lowering of sum / mean / amax: one thread per output element, looping over the reduced
// elements with an fp32 (fp64 for f64, int64 for integers) accumulator. cumsum: one thread per
// line along the scanned dim, a running sum in the same accumulator, rounded at every element.
#include "codegen/c_expr.h"
#include "codegen/lowering.h"

namespace dg {

namespace {

std::string accumulator_type(DType in, DType out) {
  return compute_ctype(out == DType::kF64 || in == DType::kF64
                           ? DType::kF64
                           : (dtype_is_float(out) ? DType::kF32 : out));
}

// One thread per item (an output element, or a line to scan) of a one-input node, grid-striding
// over `items`: the launch, and the source up to the body of the loop over the item index i.
// `constants` declares more `const long long` values beside n (", name = expr...").
std::string item_loop_kernel(LoweringContext& ctx, const Node& node, KernelLaunch& launch,
                             const SymExpr& items, const std::string& constants) {
  const Graph& g = ctx.graph();
  DType in = g.tensor(node.inputs[0]).dtype, out = g.tensor(node.output).dtype;
  launch.grid = grid_for(items);
  launch.block = {256, 1, 1};
  launch.buffers = {ctx.buffer_of(node.output), ctx.buffer_of(node.inputs[0])};
  return "extern \"C\" __global__ void __launch_bounds__(256) " + launch.name + "(" + ctype(out) +
         "* __restrict__ out, const " + ctype(in) + "* __restrict__ p0" + ctx.symbol_params() +
         ") {\n" + "  const long long n = " + c_expr(items) + constants + ";\n" +
         "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
         "       i += (long long)gridDim.x * blockDim.x) {\n";
}

void emit_cumsum(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  const TensorType& in = g.tensor(node.inputs[0]);
  const TensorType& out = g.tensor(node.output);
  std::vector<SymExpr> shape = in.shape, strides = in.contiguous_strides();
  SymExpr extent(1), stride(1);
  if (!shape.empty()) {
    int64_t d = *node.attrs.get_int("dim");
    if (d < 0) d += in.rank();
    extent = shape[d];
    stride = strides[d];
    shape[d] = SymExpr(1);  // the lines: every index with the scanned one at 0
  }
  SymExpr lines = TensorType{out.dtype, shape}.numel();
  std::string acc = accumulator_type(in.dtype, out.dtype);
  KernelLaunch launch;
  launch.name = ctx.kernel_name("cumsum");
  launch.summary = "%" + std::to_string(node.output) + " = cumsum over " + extent.to_string() +
                   " elements, " + lines.to_string() + " lines";
  std::string src = item_loop_kernel(ctx, node, launch, lines,
                                     ", len = " + c_expr(extent) + ", step = " + c_expr(stride)) +
                    unravel(shape) + "    const long long base = " + offset_expr(strides) + ";\n" +
                    "    " + acc + " a = (" + acc + ")0;\n" +
                    "    for (long long r = 0; r < len; ++r) {\n" + "      a += dg_convert<" + acc +
                    ">(p0[base + r * step]);\n" + "      out[base + r * step] = dg_convert<" +
                    ctype(out.dtype) + ">(a);\n    }\n  }\n}\n";
  ctx.add_kernel(std::move(launch), src);
}

}  // namespace

void emit_reduce_node(LoweringContext& ctx, const Node& node) {
  if (node.op == OpKind::kCumsum) return emit_cumsum(ctx, node);
  if (node.op == OpKind::kTopk) return emit_topk(ctx, node);
  const Graph& g = ctx.graph();
  const TensorType& in = g.tensor(node.inputs[0]);
  const TensorType& out = g.tensor(node.output);
  std::vector<bool> reduced(in.shape.size(), false);
  const std::vector<int64_t> dims =
      *node.attrs.get_ints("dims");  // a copy: get_ints returns a temporary
  for (int64_t d : dims) reduced[d < 0 ? d + in.rank() : d] = true;

  std::vector<SymExpr> in_strides = in.contiguous_strides();
  std::vector<SymExpr> kept_shape, kept_strides, red_shape, red_strides;
  for (int d = 0; d < in.rank(); ++d) {
    (reduced[d] ? red_shape : kept_shape).push_back(in.shape[d]);
    (reduced[d] ? red_strides : kept_strides).push_back(in_strides[d]);
  }
  SymExpr n_out = TensorType{out.dtype, kept_shape}.numel();
  SymExpr n_red = TensorType{out.dtype, red_shape}.numel();
  std::string acc = accumulator_type(in.dtype, out.dtype);

  std::string init, step, finish = "a";
  switch (node.op) {
    case OpKind::kAmax:
      // PyTorch rejects a max over nothing; so does every call with such an extent.
      ctx.require_positive(n_red, "amax over an empty dimension (%" + std::to_string(node.output) +
                                      ") has no identity");
      init = "dg_lowest<" + acc + ">()";
      step = "a = dg_maximum(a, x);";
      break;
    case OpKind::kMean:
      init = "(" + acc + ")0";
      step = "a += x;";
      finish = "a / (" + acc + ")(" + c_expr(n_red) + ")";
      break;
    default:
      init = "(" + acc + ")0";
      step = "a += x;";
  }

  // Offsets: kept index i (unravelled to i0..) and reduced index r (unravelled to j0..).
  std::string red_unravel = unravel(red_shape, "r", "j");
  std::string red_offset = offset_expr(red_strides, SymExpr(0), "j");

  KernelLaunch launch;
  launch.name = ctx.kernel_name(std::string(op_name(node.op)));
  launch.summary = "%" + std::to_string(node.output) + " = " + std::string(op_name(node.op)) +
                   " of " + n_red.to_string() + " elements into " + n_out.to_string();
  std::string src = item_loop_kernel(ctx, node, launch, n_out, ", nr = " + c_expr(n_red)) +
                    unravel(kept_shape) +
                    "    const long long base = " + offset_expr(kept_strides) + ";\n" + "    " +
                    acc + " a = " + init + ";\n" + "    for (long long r = 0; r < nr; ++r) {\n" +
                    red_unravel + "      const " + acc + " x = dg_convert<" + acc + ">(p0[base + " +
                    red_offset + "]);\n" + "      " + step + "\n    }\n" +
                    "    out[i] = dg_convert<" + ctype(out.dtype) + ">(" + finish + ");\n  }\n}\n";
  ctx.add_kernel(std::move(launch), src);
}

}  // namespace dg
