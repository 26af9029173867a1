// Lowering of reshape / permute / expand / slice / cat as strided copies.
#include "codegen/c_expr.h"
#include "codegen/pointwise.h"

namespace dg {

namespace {
PointwiseKernel copy_kernel(LoweringContext& ctx, const Node& node, const std::string& what) {
  const TensorType& out = ctx.graph().tensor(node.output);
  PointwiseKernel k;
  k.what = what;
  k.summary = "%" + std::to_string(node.output) + " = " + what + " -> " + out.to_string();
  k.out = ctx.buffer_of(node.output);
  k.out_dtype = out.dtype;
  k.shape = out.shape;
  k.compute_type = ctype(out.dtype);
  k.value = "v0";
  return k;
}
}  // namespace

void emit_layout_node(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  const TensorType& in = g.tensor(node.inputs[0]);
  const TensorType& out = g.tensor(node.output);
  std::vector<SymExpr> in_strides = in.contiguous_strides();
  auto axis = [&](int64_t a, int rank) { return a < 0 ? a + rank : a; };

  switch (node.op) {
    case OpKind::kReshape: {
      // Both sides are contiguous: the linear index is unchanged.
      PointwiseKernel k = copy_kernel(ctx, node, "reshape");
      k.shape = {out.numel()};
      k.operands.push_back({ctx.buffer_of(node.inputs[0]), in.dtype, "i"});
      emit_pointwise(ctx, k);
      return;
    }
    case OpKind::kPermute: {
      auto dims = *node.attrs.get_ints("dims");
      std::vector<SymExpr> strides;
      for (int64_t d : dims) strides.push_back(in_strides[axis(d, in.rank())]);
      PointwiseKernel k = copy_kernel(ctx, node, "permute");
      k.operands.push_back({ctx.buffer_of(node.inputs[0]), in.dtype, offset_expr(strides)});
      emit_pointwise(ctx, k);
      return;
    }
    case OpKind::kExpand: {
      PointwiseKernel k = copy_kernel(ctx, node, "expand");
      k.operands.push_back({ctx.buffer_of(node.inputs[0]), in.dtype,
                            offset_expr(broadcast_strides(in.shape, out.shape))});
      emit_pointwise(ctx, k);
      return;
    }
    case OpKind::kSlice: {
      int64_t d = axis(*node.attrs.get_int("dim"), in.rank());
      SymExpr start = (*node.attrs.get_syms("start"))[0];
      int64_t step = node.attrs.get_int("step").value_or(1);
      std::vector<SymExpr> strides = in_strides;
      SymExpr base = start * in_strides[d];
      strides[d] = in_strides[d] * SymExpr(step);
      PointwiseKernel k = copy_kernel(ctx, node, "slice");
      k.operands.push_back({ctx.buffer_of(node.inputs[0]), in.dtype, offset_expr(strides, base)});
      emit_pointwise(ctx, k);
      return;
    }
    case OpKind::kCat: {
      // One kernel over the output: each element finds its operand by comparing its index along
      // the cat dim with the operands' running starts (a chain of ?: reads only the operand it
      // picks; an empty operand's range never matches).
      int64_t d = axis(*node.attrs.get_int("dim"), out.rank());
      const std::string at = "i" + std::to_string(d);
      PointwiseKernel k = copy_kernel(ctx, node, "cat");
      k.summary += ", " + std::to_string(node.inputs.size()) + " operands";
      std::string value;
      SymExpr start(0);
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const TensorType& part = g.tensor(node.inputs[j]);
        std::vector<SymExpr> strides = part.contiguous_strides();
        k.operands.push_back({ctx.buffer_of(node.inputs[j]), part.dtype, ""});
        const std::string load = "dg_convert<" + k.compute_type + ">(p" + std::to_string(j) + "[" +
                                 offset_expr(strides, SymExpr(0) - start * strides[d]) + "])";
        start = start + part.shape[d];
        value += j + 1 < node.inputs.size()
                     ? "(" + at + " < " + c_expr(start) + ") ? " + load + "\n        : "
                     : load;
      }
      k.value = value;
      emit_pointwise(ctx, k);
      return;
    }
    default:
      break;
  }
}

}  // namespace dg
