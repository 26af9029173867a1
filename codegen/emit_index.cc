// Lowering of index_select (gather) and index_add (scatter-accumulate).
//
// Note [Out-of-range indices]
// A negative index wraps once, as in PyTorch. An index still out of range reads zero (gather) or
// is dropped (scatter) instead of touching memory outside the tensor; PyTorch would raise.
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/pointwise.h"

namespace dg {

namespace {
// Statements that load the wrapped index for dimension `d` into `ix`, skipping bad indices.
std::string index_prologue(int64_t d, const SymExpr& extent, const std::string& on_bad) {
  return "    const long long ix = dg_wrap_index((long long)p1[i" + std::to_string(d) + "], " +
         c_expr(extent) + ");\n    if (ix < 0) { " + on_bad + " continue; }\n";
}
}  // namespace

void emit_index_node(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  const TensorType& x = g.tensor(node.inputs[0]);
  const TensorType& idx = g.tensor(node.inputs[1]);
  const TensorType& out = g.tensor(node.output);
  int64_t d = *node.attrs.get_int("dim");
  if (d < 0) d += x.rank();
  std::vector<SymExpr> x_strides = x.contiguous_strides();
  std::string tag = "%" + std::to_string(node.output);

  if (node.op == OpKind::kIndexSelect) {
    PointwiseKernel k;
    k.what = "index_select";
    k.summary = tag + " = index_select dim " + std::to_string(d);
    k.out = ctx.buffer_of(node.output);
    k.out_dtype = out.dtype;
    k.shape = out.shape;
    k.compute_type = ctype(out.dtype);
    std::vector<SymExpr> strides = x_strides;
    strides[d] = SymExpr(0);
    k.operands.push_back({ctx.buffer_of(node.inputs[0]), x.dtype,
                          offset_expr(strides) + " + ix * " + c_expr(x_strides[d])});
    k.operands.push_back({ctx.buffer_of(node.inputs[1]), idx.dtype, ""});
    k.prologue =
        index_prologue(d, x.shape[d], "out[i] = dg_convert<" + ctype(out.dtype) + ">(0.0f);");
    k.value = "v0";
    emit_pointwise(ctx, k);
    return;
  }

  // index_add: accumulate in f32 (a workspace unless the result is f32), then round once.
  if (out.dtype == DType::kF64 || !dtype_is_float(out.dtype))
    throw std::invalid_argument("index_add on " + std::string(dtype_name(out.dtype)) +
                                " is not supported (float32/bfloat16/float16 only)");
  const TensorType& src = g.tensor(node.inputs[2]);
  double alpha = node.attrs.get_float("alpha").value_or(1.0);
  BufferRef acc = out.dtype == DType::kF32
                      ? ctx.buffer_of(node.output)
                      : ctx.workspace(out.numel() * SymExpr(4), tag + " index_add accumulator");
  TensorType acc_type{DType::kF32, out.shape};
  {
    PointwiseKernel init;
    init.what = "index_add_init";
    init.summary = tag + " accumulator = x";
    init.out = acc;
    init.out_dtype = DType::kF32;
    init.shape = out.shape;
    init.operands.push_back({ctx.buffer_of(node.inputs[0]), x.dtype, "i"});
    init.value = "v0";
    emit_pointwise(ctx, init);
  }
  {
    PointwiseKernel scatter;
    scatter.what = "index_add_scatter";
    scatter.summary = tag + " accumulator[idx] += alpha * src";
    scatter.out = acc;
    scatter.out_dtype = DType::kF32;
    scatter.shape = src.shape;
    std::vector<SymExpr> strides = x_strides;
    strides[d] = SymExpr(0);
    scatter.out_offset = offset_expr(strides) + " + ix * " + c_expr(x_strides[d]);
    scatter.operands.push_back({ctx.buffer_of(node.inputs[2]), src.dtype, "i"});
    scatter.operands.push_back({ctx.buffer_of(node.inputs[1]), idx.dtype, ""});
    scatter.prologue = index_prologue(d, x.shape[d], "");
    scatter.value = "v0 * " + c_float(alpha);
    scatter.atomic_add = true;
    emit_pointwise(ctx, scatter);
  }
  if (!(acc == ctx.buffer_of(node.output)))
    emit_copy(ctx, acc_type, acc, out.dtype, ctx.buffer_of(node.output));
}

}  // namespace dg
