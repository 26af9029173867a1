// Lowering of the index ops: index_select and gather (reads), index_add (scatter-accumulate),
// index_copy and scatter (scatter-store).
//
// Note [Out-of-range indices]
// A negative index wraps once, as in PyTorch. PyTorch raises on an index still out of range; a
// kernel cannot raise, so the result is poisoned instead of silently wrong: a read gives NaN, and
// a scatter leaves its contribution out and writes NaN at the same position of the indexed dim's
// first slot (after every valid write, so nothing overwrites it). Results of an integer or bool
// dtype have no NaN; there a bad read gives 0 and a bad write is dropped (a known limitation).
// The reference evaluator reports an error for any out-of-range index.
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/pointwise.h"

namespace dg {

namespace {

// Loads the wrapped index (operand p1 at `at`) for a dim of `extent` into `ix`; a bad one runs
// `on_bad` and skips the element.
std::string index_prologue(const std::string& at, const SymExpr& extent,
                           const std::string& on_bad) {
  return "    const long long ix = dg_wrap_index((long long)p1[" + at + "], " + c_expr(extent) +
         ");\n    if (ix < 0) { " + on_bad + " continue; }\n";
}

// The element of a tensor with `strides` at the current index i0.., with dim d replaced by ix.
std::string indexed_offset(const std::vector<SymExpr>& strides, int64_t d) {
  std::vector<SymExpr> s = strides;
  s[d] = SymExpr(0);
  return offset_expr(s) + " + ix * " + c_expr(strides[d]);
}

std::string poison(DType t) {
  return dtype_is_float(t) ? "dg_convert<" + ctype(t) + ">(dg_nan())"
                           : "dg_convert<" + ctype(t) + ">(0)";
}

struct IndexNode {
  const TensorType& x;
  const TensorType& idx;
  const TensorType& out;
  int64_t d;
  std::string tag;
  bool per_element;  // gather/scatter: idx has x's rank; index_*: a 1-D idx on dim d
  // Where the index of the current element is, in the iteration space of idx (or src).
  std::string index_at() const { return per_element ? "i" : "i" + std::to_string(d); }
};

// A second pass for scatters into a float result: NaN where an index was out of range.
void emit_scatter_poison(LoweringContext& ctx, const Node& node, const IndexNode& n,
                         const std::vector<SymExpr>& space, BufferRef out) {
  if (!dtype_is_float(n.out.dtype)) return;
  PointwiseKernel k;
  k.what = "index_poison";
  k.summary = n.tag + " NaN where an index is out of range";
  k.out = out;
  k.out_dtype = n.out.dtype;
  k.shape = space;
  std::vector<SymExpr> s = n.x.contiguous_strides();
  s[n.d] = SymExpr(0);
  k.out_offset = offset_expr(s);
  k.operands.push_back({ctx.buffer_of(node.inputs[0]), n.x.dtype, ""});
  k.operands.push_back({ctx.buffer_of(node.inputs[1]), n.idx.dtype, ""});
  k.prologue = "    if (dg_wrap_index((long long)p1[" + n.index_at() + "], " +
               c_expr(n.x.shape[n.d]) + ") >= 0) continue;\n";
  k.compute_type = "float";
  k.value = "dg_nan()";
  emit_pointwise(ctx, k);
}

void emit_read(LoweringContext& ctx, const Node& node, const IndexNode& n) {
  PointwiseKernel k;
  k.what = std::string(op_name(node.op));
  k.summary = n.tag + " = " + k.what + " dim " + std::to_string(n.d);
  k.out = ctx.buffer_of(node.output);
  k.out_dtype = n.out.dtype;
  k.shape = n.out.shape;
  k.compute_type = ctype(n.out.dtype);
  k.operands.push_back(
      {ctx.buffer_of(node.inputs[0]), n.x.dtype, indexed_offset(n.x.contiguous_strides(), n.d)});
  k.operands.push_back({ctx.buffer_of(node.inputs[1]), n.idx.dtype, ""});
  k.prologue =
      index_prologue(n.index_at(), n.x.shape[n.d], "out[i] = " + poison(n.out.dtype) + ";");
  k.value = "v0";
  emit_pointwise(ctx, k);
}

// index_add: accumulate in f32 (a workspace unless the result is f32), then round once.
void emit_index_add(LoweringContext& ctx, const Node& node, const IndexNode& n) {
  if (n.out.dtype == DType::kF64 || !dtype_is_float(n.out.dtype))
    throw std::invalid_argument("index_add on " + std::string(dtype_name(n.out.dtype)) +
                                " is not supported (float32/bfloat16/float16 only)");
  const TensorType& src = ctx.graph().tensor(node.inputs[2]);
  double alpha = node.attrs.get_float("alpha").value_or(1.0);
  BufferRef acc = n.out.dtype == DType::kF32
                      ? ctx.buffer_of(node.output)
                      : ctx.workspace(n.out.numel() * SymExpr(4), n.tag + " index_add accumulator");
  emit_copy(ctx, TensorType{n.x.dtype, n.x.shape}, ctx.buffer_of(node.inputs[0]), DType::kF32, acc);
  PointwiseKernel scatter;
  scatter.what = "index_add_scatter";
  scatter.summary = n.tag + " accumulator[idx] += alpha * src";
  scatter.out = acc;
  scatter.out_dtype = DType::kF32;
  scatter.shape = src.shape;
  scatter.out_offset = indexed_offset(n.x.contiguous_strides(), n.d);
  scatter.operands.push_back({ctx.buffer_of(node.inputs[2]), src.dtype, "i"});
  scatter.operands.push_back({ctx.buffer_of(node.inputs[1]), n.idx.dtype, ""});
  scatter.prologue = index_prologue(n.index_at(), n.x.shape[n.d], "");
  scatter.value = "v0 * " + c_float(alpha);
  scatter.atomic_add = true;
  emit_pointwise(ctx, scatter);
  emit_scatter_poison(ctx, node, n, src.shape, acc);
  if (!(acc == ctx.buffer_of(node.output)))
    emit_copy(ctx, TensorType{DType::kF32, n.out.shape}, acc, n.out.dtype,
              ctx.buffer_of(node.output));
}

// index_copy / scatter: copy x, then store src at the indexed positions. With repeated indices
// one of the written values wins, unspecified which (as in PyTorch).
void emit_store(LoweringContext& ctx, const Node& node, const IndexNode& n) {
  const TensorType& src = ctx.graph().tensor(node.inputs[2]);
  BufferRef out = ctx.buffer_of(node.output);
  emit_copy(ctx, n.x, ctx.buffer_of(node.inputs[0]), n.out.dtype, out);
  PointwiseKernel k;
  k.what = std::string(op_name(node.op));
  k.summary = n.tag + " = " + k.what + " dim " + std::to_string(n.d);
  k.out = out;
  k.out_dtype = n.out.dtype;
  k.shape = src.shape;
  k.out_offset = indexed_offset(n.x.contiguous_strides(), n.d);
  k.compute_type = ctype(n.out.dtype);
  k.operands.push_back({ctx.buffer_of(node.inputs[2]), src.dtype, "i"});
  k.operands.push_back({ctx.buffer_of(node.inputs[1]), n.idx.dtype, ""});
  k.prologue = index_prologue(n.index_at(), n.x.shape[n.d], "");
  k.value = "v0";
  emit_pointwise(ctx, k);
  emit_scatter_poison(ctx, node, n, src.shape, out);
}

}  // namespace

void emit_index_node(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  const TensorType& x = g.tensor(node.inputs[0]);
  int64_t d = *node.attrs.get_int("dim");
  if (d < 0) d += x.rank();
  IndexNode n{x,
              g.tensor(node.inputs[1]),
              g.tensor(node.output),
              d,
              "%" + std::to_string(node.output),
              node.op == OpKind::kGather || node.op == OpKind::kScatter};
  switch (node.op) {
    case OpKind::kIndexSelect:
    case OpKind::kGather:
      return emit_read(ctx, node, n);
    case OpKind::kIndexAdd:
      return emit_index_add(ctx, node, n);
    default:
      return emit_store(ctx, node, n);  // kIndexCopy, kScatter
  }
}

}  // namespace dg
