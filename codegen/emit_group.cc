// Lowering of one fusion group (Note [Fusion groups]) as one kernel: a GEMM with its prologue,
// operand views and epilogue, or a pointwise kernel with several outputs.
#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/epilogue_operands.h"
#include "codegen/gemm.h"
#include "codegen/group.h"
#include "codegen/pointwise.h"
#include "codegen/scalar_ops.h"
#include "codegen/wgrad.h"
#include "ir/fusion.h"
#include "ir/strided_view.h"

namespace dg {

namespace {

bool is_member(const std::set<int>& members, const Graph& g, ValueId v) {
  return g.value(v).producer >= 0 && members.count(g.value(v).producer) != 0;
}

}  // namespace

bool escapes(const Graph& g, const std::set<int>& members, ValueId v) {
  for (ValueId o : g.outputs)
    if (o == v) return true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (members.count(static_cast<int>(i))) continue;
    for (ValueId in : g.nodes[i].inputs)
      if (in == v) return true;
  }
  return false;
}

namespace {

// Builds the per-element body: a variable per member value, stores for the escaping ones.
class ElementBody {
 public:
  ElementBody(LoweringContext& ctx, KernelParams& params, const std::set<int>& members,
              std::vector<SymExpr> shape, std::string same_shape_offset, std::string index_setup)
      : ctx_(ctx),
        g_(ctx.graph()),
        params_(params),
        members_(members),
        shape_(std::move(shape)),
        same_offset_(std::move(same_shape_offset)),
        index_setup_(std::move(index_setup)) {}

  // Binds `v` to an expression already in the value's compute type (an accumulator).
  void bind(ValueId v, const std::string& expr) { define(v, round_to_storage(v, expr)); }

  void add_node(const Node& node) {
    if (op_info(node.op).category == OpCategory::kMatmul) return add_epilogue_matmul(node);
    const OpInfo& info = op_info(node.op);
    std::string ct = compute_ctype(operand_dtype(g_, node));
    std::vector<std::string> args;
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      bool is_cond = info.category == OpCategory::kWhere && j == 0;
      args.push_back(is_cond ? "(bool)" + value(node.inputs[j], "bool")
                             : "dg_convert<" + ct + ">(" + value(node.inputs[j], ct) + ")");
    }
    std::string expr = info.category == OpCategory::kCast ? args[0] : scalar_expr(node.op, args);
    if (expr.empty()) throw std::logic_error("no spelling for " + std::string(info.name));
    define(node.output, round_to_storage(node.output, expr));
  }

  std::string code() const { return (needs_index_ ? index_setup_ : std::string()) + body_; }
  const std::vector<EpilogueProduct>& products() const { return products_; }
  // Index variables the broadcast loads use: <var>0, <var>1, ... over the body's shape.
  void set_index_var(const std::string& var) { index_var_ = var; }
  // A GEMM epilogue's stores go through dg_put<slot>(dg_st, ...), slot the output's position in
  // `stores` (Note [Paired stores] in codegen/device/dg_store.cuh).
  void store_through_slots(std::vector<EpilogueStore>* stores) { stores_ = stores; }
  // Its reads of the output's shape go through dg_in<k>(dg_st, ...), k the operand's position in
  // `operands` (Note [Epilogue operand loads] in codegen/device/dg_epilogue_loads.cuh).
  void load_through_slots(std::vector<EpilogueOperand>* operands) { operands_ = operands; }

  // The expression for value `v` inside the body (a member's variable, a literal, or a load).
  std::string value(ValueId v, const std::string& compute_type) {
    if (auto it = vars_.find(v); it != vars_.end()) return it->second;
    std::string lit;
    if (constant_literal(g_, v, compute_type, &lit)) return lit;
    const TensorType& t = g_.tensor(v);
    std::string p = params_.add(ctx_.buffer_of(v), t.dtype, false);
    std::string offset = same_offset_;
    if (t.shape != shape_) {
      offset = offset_expr(broadcast_strides(t.shape, shape_), SymExpr(0), index_var_);
      needs_index_ = true;
    }
    const std::string read =
        operands_ && offset == same_offset_
            ? epilogue_operand_read(*operands_, ctx_.buffer_of(v), t.dtype, p, offset)
            : p + "[" + offset + "]";
    return "dg_convert<" + compute_ctype(t.dtype) + ">(" + read + ")";
  }

 private:
  std::string round_to_storage(ValueId v, const std::string& expr) {
    DType t = g_.tensor(v).dtype;
    return "dg_round<" + ctype(t) + ", " + compute_ctype(t) + ">(" + expr + ")";
  }

  void define(ValueId v, const std::string& expr) {
    std::string var = "v" + std::to_string(v);
    DType t = g_.tensor(v).dtype;
    body_ += "    const " + compute_ctype(t) + " " + var + " = " + expr + ";\n";
    vars_[v] = var;
    if (!escapes(g_, members_, v)) return;
    std::string out = params_.add(ctx_.buffer_of(v), t, true);
    const std::string stored = "dg_convert<" + ctype(t) + ">(" + var + ")";
    if (!stores_) {
      body_ += "    " + out + "[" + same_offset_ + "] = " + stored + ";\n";
      return;
    }
    body_ += "    dg_put<" + std::to_string(stores_->size()) + ">(dg_st, " + out + " + (" +
             same_offset_ + "), " + stored + ");\n";
    stores_->push_back({ctx_.buffer_of(v), t, out});
  }

  // out[row, col] = sum_j t[row, j] * w[.., ..] over the static K of an epilogue matmul.
  void add_epilogue_matmul(const Node& node) {
    const TensorType& t = g_.tensor(node.inputs[0]);
    const TensorType& w = g_.tensor(node.inputs[1]);
    auto K = t.shape.back().as_const();
    const std::vector<SymExpr>& out = g_.tensor(node.output).shape;
    bool rows_match = std::equal(t.shape.begin(), t.shape.end() - 1, out.begin(), out.end() - 1);
    if (!K || !rows_match || w.rank() != 2 || out != shape_)
      throw std::logic_error("an epilogue matmul needs a static K and the group's rows");
    std::string ct = compute_ctype(g_.tensor(node.output).dtype);
    std::string pt = params_.add(ctx_.buffer_of(node.inputs[0]), t.dtype, false);
    std::string pw = params_.add(ctx_.buffer_of(node.inputs[1]), w.dtype, false);
    std::string k = std::to_string(*K);
    std::string var = "r" + std::to_string(node.output);
    EpilogueProduct product;
    product.name = "rank" + std::to_string(node.output);
    product.t = pt;
    product.w = pw;
    product.k = *K;
    product.linear_weight = node.op == OpKind::kLinear;
    product.w_ld = c_expr(w.shape[1]);
    product.ct = ct;
    products_.push_back(product);
    body_ += "    " + ct + " " + var + " = " + product.name + ";\n";  // epilogue_lambda's
    if (node.inputs.size() == 3)
      body_ += "    " + var + " += dg_convert<" + ct + ">(" +
               params_.add(ctx_.buffer_of(node.inputs[2]), g_.tensor(node.inputs[2]).dtype, false) +
               "[col]);\n";
    define(node.output, round_to_storage(node.output, var));
  }

  LoweringContext& ctx_;
  const Graph& g_;
  KernelParams& params_;
  const std::set<int>& members_;
  std::vector<SymExpr> shape_;
  std::string same_offset_, index_setup_, index_var_ = "i";
  std::map<ValueId, std::string> vars_;
  std::string body_;
  std::vector<EpilogueProduct> products_;
  std::vector<EpilogueStore>* stores_ = nullptr;
  std::vector<EpilogueOperand>* operands_ = nullptr;
  bool needs_index_ = false;
};

// The member `cat` node producing `v`, if any (a GEMM operand concatenated along K).
const Node* member_cat(const Graph& g, const std::set<int>& members, ValueId v) {
  int p = g.value(v).producer;
  if (p < 0 || !members.count(p) || g.nodes[p].op != OpKind::kCat) return nullptr;
  return &g.nodes[p];
}

// An anchor operand: a cast prologue and / or a view chain of members over an outside buffer.
GemmOperandRef gemm_operand(LoweringContext& ctx, const std::set<int>& members, ValueId v,
                            bool flatten_rows, bool linear_weight) {
  const Graph& g = ctx.graph();
  GemmOperandRef op;
  op.value_dtype = g.tensor(v).dtype;
  if (is_member(members, g, v) && g.nodes[g.value(v).producer].op == OpKind::kCast)
    v = g.nodes[g.value(v).producer].inputs[0];  // the prologue: convert in the tile loads
  op.load_dtype = g.tensor(v).dtype;
  std::optional<StridedView> view;
  if (is_member(members, g, v)) {
    view = strided_view_of(g, v);
    if (!view || is_member(members, g, view->base))
      throw std::logic_error("a fused GEMM operand is neither a buffer nor a view of one");
    for (int n : view->nodes)
      if (!members.count(n)) throw std::logic_error("a fused view chain leaves its group");
  } else {
    view = StridedView{v, g.tensor(v).shape, g.tensor(v).contiguous_strides(), SymExpr(0), {}};
  }
  op.buffer = ctx.buffer_of(view->base);
  op.offset = view->offset;
  size_t r = view->shape.size();
  if (flatten_rows)  // a linear's x[..., K] read as [M, K]: the leading dims must fold into one
    for (size_t d = 0; d + 2 < r; ++d)
      if (view->strides[d] != view->strides[d + 1] * view->shape[d + 1])
        throw std::logic_error("a fused linear input's leading dims do not fold");
  // The last two dims are (rows, cols); a linear's weight [N, K] is read as B (k, n).
  SymExpr rs = r >= 2 ? view->strides[r - 2] : SymExpr(0), cs = view->strides[r - 1];
  op.row_stride = linear_weight ? cs : rs;
  op.col_stride = linear_weight ? rs : cs;
  return op;
}

}  // namespace

GemmKernelSpec gemm_group_spec(LoweringContext& ctx, const std::vector<int>& order,
                               const std::set<int>& members, const std::vector<int>& anchors,
                               KernelParams& params) {
  const Graph& g = ctx.graph();
  const Node& first = g.nodes[anchors[0]];
  const TensorType& a_t = g.tensor(first.inputs[0]);
  const TensorType& b_t = g.tensor(first.inputs[1]);
  const TensorType& out = g.tensor(first.output);
  GemmKernelSpec spec;
  bool linear = first.op == OpKind::kLinear;
  std::vector<SymExpr> lead(out.shape.begin(), out.shape.end() - 1);
  if (linear) {
    spec.K = a_t.shape.back();
    spec.N = b_t.shape[0];
    spec.M = TensorType{out.dtype, lead}.numel();
  } else {
    spec.M = a_t.shape[a_t.rank() - 2];
    spec.K = a_t.shape.back();
    spec.N = b_t.shape.back();
    spec.batch.assign(out.shape.begin(), out.shape.end() - 2);
    if (a_t.rank() != 2 || b_t.rank() != 2) {
      if (members.size() != anchors.size()) throw std::logic_error("a batched GEMM with epilogue");
      // Batched matmul: contiguous operands, broadcast over batch dims.
      for (const TensorType* t : {&a_t, &b_t}) {
        std::vector<SymExpr> bshape(t->shape.begin(), t->shape.end() - 2);
        std::vector<SymExpr> bs = broadcast_strides(bshape, spec.batch);
        for (auto& x : bs) x = x * t->shape[t->rank() - 2] * t->shape.back();
        (t == &a_t ? spec.a : spec.b.emplace_back()).batch_strides = bs;
      }
    } else {
      spec.batch.clear();
    }
  }
  spec.acc_dtype = out.dtype == DType::kF64 ? DType::kF64 : DType::kF32;
  if (const Node* a_cat = member_cat(g, members, first.inputs[0])) {
    // Note [K-concatenated GEMMs]: A = cat(A_j) along K, B = cat(B_j) along K; one K segment each.
    const Node* b_cat = member_cat(g, members, first.inputs[1]);
    if (!b_cat || anchors.size() != 1 || a_cat->inputs.size() != b_cat->inputs.size() ||
        !spec.batch.empty())
      throw std::logic_error("a GEMM over a concatenated K needs both operands concatenated");
    for (size_t j = 0; j < a_cat->inputs.size(); ++j) {
      GemmKSegment seg;
      seg.a = gemm_operand(ctx, members, a_cat->inputs[j], linear, false);
      seg.b = {gemm_operand(ctx, members, b_cat->inputs[j], false, linear)};
      seg.K = g.tensor(a_cat->inputs[j]).shape.back();
      spec.k_segments.push_back(seg);
    }
    spec.a = spec.k_segments[0].a;
    spec.b = spec.k_segments[0].b;
  } else {
    GemmOperandRef a = gemm_operand(ctx, members, first.inputs[0], linear, false);
    a.batch_strides = spec.a.batch_strides;
    std::vector<SymExpr> b_batch =
        spec.b.empty() ? std::vector<SymExpr>{} : spec.b[0].batch_strides;
    spec.a = a;
    spec.b.clear();
    for (int ai : anchors) {
      spec.b.push_back(gemm_operand(ctx, members, g.nodes[ai].inputs[1], false, linear));
      spec.b.back().batch_strides = b_batch;
    }
  }
  std::string what = anchors.size() == 2 ? "gemm2" : std::string(op_name(first.op));
  spec.what = members.size() > anchors.size() ? "fused_" + what : what;
  spec.nodes = order;
  spec.summary = "";
  for (int i : order)
    spec.summary += (spec.summary.empty() ? "" : " ") + std::string(op_name(g.nodes[i].op)) + "%" +
                    std::to_string(g.nodes[i].output);
  spec.summary +=
      " M=" + spec.M.to_string() + " N=" + spec.N.to_string() + " K=" + spec.K.to_string();

  std::string index = unravel(lead, "row", "i");
  index += "    const long long i" + std::to_string(lead.size()) + " = col;\n";
  ElementBody body(ctx, params, members, out.shape, "c_base + row * " + c_expr(spec.N) + " + col",
                   index);
  body.store_through_slots(&spec.stores);
  body.load_through_slots(&spec.operands);
  for (size_t j = 0; j < anchors.size(); ++j) {
    const Node& an = g.nodes[anchors[j]];
    std::string acc = "acc" + std::to_string(j);
    if (an.inputs.size() == 3) {
      std::string p = params.add(ctx.buffer_of(an.inputs[2]), g.tensor(an.inputs[2]).dtype, false);
      acc = "(" + acc + " + dg_convert<" + compute_ctype(spec.acc_dtype) + ">(" + p + "[col]))";
    }
    body.bind(an.output, acc);
  }
  std::set<int> done(anchors.begin(), anchors.end());
  for (int i : order) {
    if (done.count(i)) continue;
    const Node& n = g.nodes[i];
    bool operand_feeder = (n.op == OpKind::kCast || op_info(n.op).category == OpCategory::kLayout);
    if (operand_feeder) {
      bool only_operands = true;  // prologue / view members are read by the loads, not here
      for (int u : order)
        for (size_t k = 0; k < g.nodes[u].inputs.size(); ++k)
          if (g.nodes[u].inputs[k] == n.output &&
              !((k < 2 && std::find(anchors.begin(), anchors.end(), u) != anchors.end()) ||
                op_info(g.nodes[u].op).category == OpCategory::kLayout))
            only_operands = false;  // a GEMM's a or b, or any input of a view (a cat's third)
      if (only_operands && !escapes(g, members, n.output)) continue;
      if (op_info(n.op).category == OpCategory::kLayout)
        throw std::logic_error("a view in a GEMM group is read by its epilogue");
    }
    body.add_node(n);
  }
  spec.epilogue = body.code();
  spec.products = body.products();
  return spec;
}

namespace {

void emit_gemm_group(LoweringContext& ctx, const std::vector<int>& order,
                     const std::set<int>& members, const std::vector<int>& anchors) {
  KernelParams params;
  GemmKernelSpec spec = gemm_group_spec(ctx, order, members, anchors, params);
  spec.params = std::move(params);
  emit_gemm(ctx, std::move(spec));
}

void emit_pointwise_group(LoweringContext& ctx, const std::vector<int>& order,
                          const std::set<int>& members) {
  const Graph& g = ctx.graph();
  const std::vector<SymExpr>& shape = g.tensor(g.nodes[order.back()].output).shape;
  KernelParams params;
  ElementBody body(ctx, params, members, shape, "i", unravel(shape));
  std::string summary;
  for (int i : order) {
    const Node& n = g.nodes[i];
    if (g.tensor(n.output).shape != shape) throw std::logic_error("a pointwise group mixes shapes");
    body.add_node(n);
    summary +=
        (summary.empty() ? "" : " ") + std::string(op_name(n.op)) + "%" + std::to_string(n.output);
  }
  SymExpr n = TensorType{DType::kF32, shape}.numel();
  KernelLaunch launch;
  launch.name = ctx.kernel_name("fused_pointwise");
  launch.summary = summary;
  launch.grid = grid_for(n);
  launch.block = {256, 1, 1};
  std::string code = body.code();
  launch.buffers = params.buffers();
  launch.nodes = order;
  std::string src =
      "extern \"C\" __global__ void __launch_bounds__(256) " + launch.name + "(" +
      params.declaration() + ctx.symbol_params() + ") {\n" + "  const long long n = " + c_expr(n) +
      ";\n" +
      "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
      "       i += (long long)gridDim.x * blockDim.x) {\n" +
      code + "  }\n}\n";
  ctx.add_kernel(std::move(launch), src);
}

// A reduction with its prologue (elementwise members over the reduced input, evaluated per input
// element inside the reduction loop) and epilogue (elementwise members over its output).
void emit_reduce_group(LoweringContext& ctx, const std::vector<int>& order,
                       const std::set<int>& members, int reduce) {
  const Graph& g = ctx.graph();
  const Node& node = g.nodes[reduce];
  const TensorType& in = g.tensor(node.inputs[0]);
  const TensorType& out = g.tensor(node.output);
  std::vector<bool> reduced(in.shape.size(), false);
  const std::vector<int64_t> dims = node.attrs.get_ints("dims").value_or(std::vector<int64_t>{});
  for (int64_t d : dims) reduced[d < 0 ? d + in.rank() : d] = true;
  std::vector<SymExpr> in_strides = in.contiguous_strides();
  std::vector<SymExpr> kept_shape, kept_strides, red_shape, red_strides;
  std::string q_setup;  // q<d>: the input index of dim d from the kept (i) and reduced (j) indices
  for (int d = 0; d < in.rank(); ++d) {
    std::vector<SymExpr>& shape = reduced[d] ? red_shape : kept_shape;
    q_setup += "      const long long q" + std::to_string(d) + " = " + (reduced[d] ? "j" : "i") +
               std::to_string(shape.size()) + ";\n";
    shape.push_back(in.shape[d]);
    (reduced[d] ? red_strides : kept_strides).push_back(in_strides[d]);
  }
  SymExpr n_out = TensorType{out.dtype, kept_shape}.numel();
  SymExpr n_red = TensorType{out.dtype, red_shape}.numel();
  DType acc_t = out.dtype == DType::kF64 || in.dtype == DType::kF64
                    ? DType::kF64
                    : (dtype_is_float(out.dtype) ? DType::kF32 : out.dtype);
  std::string acc = compute_ctype(acc_t);
  std::string init = "(" + acc + ")0", step = "a += x;", finish = "a";
  if (node.op == OpKind::kAmax) {
    ctx.require_positive(n_red, "amax over an empty dimension (%" + std::to_string(node.output) +
                                    ") has no identity");
    init = "dg_lowest<" + acc + ">()";
    step = "a = dg_maximum(a, x);";
  } else if (node.op == OpKind::kMean) {
    finish = "a / (" + acc + ")(" + c_expr(n_red) + ")";
  }
  KernelParams params;
  const std::string in_offset = "base + " + offset_expr(red_strides, SymExpr(0), "j");
  ElementBody prologue(ctx, params, members, in.shape, in_offset, q_setup);
  prologue.set_index_var("q");
  ElementBody epilogue(ctx, params, members, out.shape, "i", unravel(out.shape, "i", "oi"));
  epilogue.set_index_var("oi");
  std::string summary;
  for (int i : order) {
    const Node& n = g.nodes[i];
    summary +=
        (summary.empty() ? "" : " ") + std::string(op_name(n.op)) + "%" + std::to_string(n.output);
    if (i == reduce) {
      epilogue.bind(node.output, finish);  // the epilogue code runs after the loop
      continue;
    }
    if (i < reduce && g.tensor(n.output).shape == in.shape)
      prologue.add_node(n);
    else if (i > reduce && g.tensor(n.output).shape == out.shape)
      epilogue.add_node(n);
    else
      throw std::logic_error("a reduction group member is over neither shape");
  }
  std::string x = prologue.value(node.inputs[0], acc);  // after the members: a variable or a load
  std::string pro = prologue.code();
  std::string epi = epilogue.code();
  KernelLaunch launch;
  launch.name = ctx.kernel_name("fused_" + std::string(op_name(node.op)));
  launch.summary = summary + " (" + n_red.to_string() + " elements into " + n_out.to_string() + ")";
  launch.grid = grid_for(n_out);
  launch.block = {256, 1, 1};
  launch.buffers = params.buffers();
  launch.nodes = order;
  std::string src =
      "extern \"C\" __global__ void __launch_bounds__(256) " + launch.name + "(" +
      params.declaration() + ctx.symbol_params() + ") {\n" +
      "  const long long n = " + c_expr(n_out) + ", nr = " + c_expr(n_red) + ";\n" +
      "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
      "       i += (long long)gridDim.x * blockDim.x) {\n" +
      unravel(kept_shape) + "    const long long base = " + offset_expr(kept_strides) + ";\n" +
      "    " + acc + " a = " + init + ";\n" + "    for (long long r = 0; r < nr; ++r) {\n" +
      unravel(red_shape, "r", "j") + pro + "      const " + acc + " x = dg_convert<" + acc + ">(" +
      x + ");\n" + "      " + step + "\n    }\n" + epi + "  }\n}\n";
  ctx.add_kernel(std::move(launch), src);
}

}  // namespace

std::vector<int> group_anchors(const Graph& g, const std::vector<int>& members) {
  std::vector<int> anchors;
  for (int i : members)
    if (op_info(g.nodes[i].op).category == OpCategory::kMatmul && !is_epilogue_matmul(g.nodes[i]))
      anchors.push_back(i);
  return anchors;
}

void emit_group(LoweringContext& ctx, const std::vector<int>& members) {
  if (is_wgrad_member(ctx.graph().nodes[members[0]])) return emit_wgrad_group(ctx, members);
  if (gemm_problem(ctx.graph().nodes[members[0]]) >= 0)
    return emit_grouped_gemm_group(ctx, members);
  std::set<int> set(members.begin(), members.end());
  std::vector<int> anchors = group_anchors(ctx.graph(), members);
  if (anchors.size() > 2) throw std::logic_error("a fusion group with more than two GEMMs");
  if (!anchors.empty()) return emit_gemm_group(ctx, members, set, anchors);
  std::vector<int> reductions;
  for (int i : members)
    if (fusable_reduction(ctx.graph().nodes[i].op)) reductions.push_back(i);
  if (reductions.size() > 1) throw std::logic_error("a fusion group with two reductions");
  if (reductions.size() == 1) return emit_reduce_group(ctx, members, set, reductions[0]);
  emit_pointwise_group(ctx, members, set);
}

// An unfused linear / matmul node is a GEMM group of one, so it runs on tensor cores when its
// operands allow (Note [Tensor-core GEMM]) and on the scalar tile otherwise (Note [Simple GEMM]
// in emit_scalar_gemm.cc).
void emit_matmul_node(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  emit_group(ctx, {static_cast<int>(&node - g.nodes.data())});
}

}  // namespace dg
