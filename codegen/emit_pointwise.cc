// Lowering of elementwise ops, casts and fills through the pointwise builder.
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/pointwise.h"
#include "codegen/scalar_ops.h"
#include "ir/shape_infer.h"
#include "ir/text_format.h"

namespace dg {

void emit_pointwise(LoweringContext& ctx, const PointwiseKernel& k) {
  SymExpr n = TensorType{k.out_dtype, k.shape}.numel();
  KernelLaunch launch;
  launch.name = ctx.kernel_name(k.what);
  launch.summary = k.summary;
  launch.grid = grid_for(n);
  launch.block = {256, 1, 1};
  launch.buffers.push_back(k.out);
  std::string out_t = ctype(k.out_dtype);
  std::string params = out_t + "* __restrict__ out";
  std::string loads;
  for (size_t j = 0; j < k.operands.size(); ++j) {
    const PointwiseOperand& op = k.operands[j];
    std::string p = "p" + std::to_string(j);
    params += ", const " + ctype(op.dtype) + "* __restrict__ " + p;
    launch.buffers.push_back(op.buffer);
    if (!op.offset.empty())
      loads += "    const " + k.compute_type + " v" + std::to_string(j) + " = dg_convert<" +
               k.compute_type + ">(" + p + "[" + op.offset + "]);\n";
  }
  std::string store =
      k.atomic_add
          ? "    dg_atomic_accumulate(&out[" + k.out_offset + "], " + k.value + ");\n"
          : "    out[" + k.out_offset + "] = dg_convert<" + out_t + ">(" + k.value + ");\n";
  std::string src =
      "extern \"C\" __global__ void __launch_bounds__(256) " + launch.name + "(" + params +
      ctx.symbol_params() + ") {\n" + "  const long long n = " + c_expr(n) + ";\n" +
      "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
      "       i += (long long)gridDim.x * blockDim.x) {\n" +
      unravel(k.shape) + k.prologue + loads + store + "  }\n}\n";
  ctx.add_kernel(std::move(launch), src);
}

namespace {

std::string literal(double v, const std::string& type) { return c_float(v, type); }

}  // namespace

bool constant_literal(const Graph& g, ValueId v, const std::string& compute_type,
                      std::string* literal_out) {
  const Value& val = g.value(v);
  if (val.producer < 0) return false;
  const Node& p = g.nodes[val.producer];
  if (p.op != OpKind::kConstant) return false;
  std::string storage = ctype(val.type.dtype);
  std::string lit =
      literal(p.attrs.get_float("value").value_or(0.0), compute_ctype(val.type.dtype));
  *literal_out = "dg_convert<" + compute_type + ">(dg_convert<" + storage + ">(" + lit + "))";
  return true;
}

DType operand_dtype(const Graph& g, const Node& node) {
  DType t = g.tensor(node.output).dtype;
  if (op_info(node.op).category == OpCategory::kCompare) {
    const TensorType &a = g.tensor(node.inputs[0]), &b = g.tensor(node.inputs[1]);
    return promote_types(a.dtype, a.rank() == 0, b.dtype, b.rank() == 0);
  }
  return t;
}

void emit_pointwise_node(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  const TensorType& out = g.tensor(node.output);
  const OpInfo& info = op_info(node.op);
  PointwiseKernel k;
  k.what = std::string(info.name);
  k.summary = "%" + std::to_string(node.output) + " = " + std::string(info.name);
  k.out = ctx.buffer_of(node.output);
  k.out_dtype = out.dtype;
  k.shape = out.shape;

  if (node.op == OpKind::kSymConstant) {  // the symbol values are kernel arguments
    k.compute_type = compute_ctype(out.dtype);
    k.value = "(" + k.compute_type + ")(" + c_expr((*node.attrs.get_syms("value"))[0]) + ")";
    emit_pointwise(ctx, k);
    return;
  }
  if (info.category == OpCategory::kCreate) {
    k.compute_type = compute_ctype(out.dtype);
    k.value = literal(node.attrs.get_float("value").value_or(0.0), k.compute_type);
    emit_pointwise(ctx, k);
    return;
  }
  if (info.category == OpCategory::kCast) {
    const TensorType& in = g.tensor(node.inputs[0]);
    k.compute_type = compute_ctype(in.dtype);
    k.operands.push_back({ctx.buffer_of(node.inputs[0]), in.dtype, "i"});
    k.value = "v0";
    emit_pointwise(ctx, k);
    return;
  }
  k.compute_type = compute_ctype(operand_dtype(g, node));
  std::vector<std::string> args;
  for (size_t j = 0; j < node.inputs.size(); ++j) {
    ValueId in = node.inputs[j];
    const TensorType& t = g.tensor(in);
    std::string constant;
    bool is_cond = info.category == OpCategory::kWhere && j == 0;
    if (!is_cond && constant_literal(g, in, k.compute_type, &constant)) {
      args.push_back(constant);
      continue;
    }
    std::string var = "v" + std::to_string(k.operands.size());
    std::string offset = offset_expr(broadcast_strides(t.shape, out.shape));
    if (is_cond) {
      k.operands.push_back({ctx.buffer_of(in), t.dtype, ""});
      args.push_back("(bool)p" + std::to_string(k.operands.size() - 1) + "[" + offset + "]");
      continue;
    }
    k.operands.push_back({ctx.buffer_of(in), t.dtype, offset});
    args.push_back(var);
  }
  k.value = scalar_expr(node.op, args);
  if (k.value.empty()) throw std::logic_error("no spelling for " + std::string(info.name));
  emit_pointwise(ctx, k);
}

void emit_copy(LoweringContext& ctx, const TensorType& type, BufferRef from, DType to_dtype,
               BufferRef to) {
  PointwiseKernel k;
  k.what = "copy";
  k.summary = "copy " + type.to_string() + " to " + std::string(dtype_name(to_dtype));
  k.out = to;
  k.out_dtype = to_dtype;
  k.shape = type.shape;
  k.compute_type = to_dtype == type.dtype ? ctype(type.dtype) : compute_ctype(type.dtype);
  k.operands.push_back({from, type.dtype, "i"});
  k.value = "v0";
  emit_pointwise(ctx, k);
}

}  // namespace dg
