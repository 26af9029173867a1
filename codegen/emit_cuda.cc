#include "codegen/emit_cuda.h"

#include <map>
#include <set>

#include "codegen/group.h"
#include "codegen/lowering.h"
#include "ir/fusion.h"

namespace dg {

namespace {

// Note [Inlined constants]
// A rank-0 `constant` read only by elementwise ops is spelled as a literal inside them, so it
// gets neither a buffer nor a kernel.
bool inlined_constant(const Graph& g, const Node& node) {
  if (node.op != OpKind::kConstant) return false;
  for (ValueId out : g.outputs)
    if (out == node.output) return false;
  for (const Node& user : g.nodes) {
    for (size_t j = 0; j < user.inputs.size(); ++j) {
      if (user.inputs[j] != node.output) continue;
      OpCategory c = op_info(user.op).category;
      bool elementwise = c == OpCategory::kUnary || c == OpCategory::kBinary ||
                         c == OpCategory::kCompare || (c == OpCategory::kWhere && j > 0);
      if (!elementwise) return false;
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> codegen_switch_names() { return {"wgmma"}; }

CodegenOptions codegen_options_for(const std::string& arch, const std::set<std::string>& disabled) {
  CodegenOptions o;
  // compute_90a: the PTX an older driver JIT-compiles (Note [PTX when the driver is older]).
  o.wgmma = (arch == "sm_90a" || arch == "compute_90a") && !disabled.count("wgmma");
  return o;
}

// Note [Reshapes are aliases]
// A reshape keeps a contiguous tensor's bytes in the same order, so a reshape that no fusion
// group took is not a kernel: its value takes its input's buffer. That is safe because no kernel
// writes into a buffer it did not allocate for its own node (the graph is SSA and workspace slots
// are never reused), so every alias stays read-only after its producer ran. A reshape that is a
// graph output keeps its copy, as every output is written into the caller's tensor.
KernelPlan emit_cuda(const Graph& g, const CodegenOptions& options) {
  LoweringContext ctx(g, options);
  for (size_t i = 0; i < g.inputs.size(); ++i)
    ctx.set_buffer(g.inputs[i], {BufferRef::kInput, static_cast<int>(i)});
  // Outputs produced by a node are written in place; inputs or repeated values get a copy.
  std::vector<bool> needs_copy(g.outputs.size(), false);
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    ValueId v = g.outputs[j];
    if (ctx.has_buffer(v))
      needs_copy[j] = true;
    else
      ctx.set_buffer(v, {BufferRef::kOutput, static_cast<int>(j)});
  }

  // Note [Fusion groups] (ir/fusion.h): a group is emitted at its last member, with buffers for
  // the values it hands to the rest of the graph.
  std::map<int64_t, std::vector<int>> groups;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (int64_t id = fusion_group(g.nodes[i])) groups[id].push_back(static_cast<int>(i));
  auto assign_buffer = [&](ValueId v) {
    const TensorType& t = g.tensor(v);
    if (!ctx.has_buffer(v))
      ctx.set_buffer(v, ctx.workspace(t.numel() * SymExpr(dtype_size(t.dtype)),
                                      "%" + std::to_string(v) + " " + t.to_string()));
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    if (inlined_constant(g, node)) continue;
    ctx.set_current_node(static_cast<int>(i));
    try {
      if (int64_t id = fusion_group(node)) {
        const std::vector<int>& members = groups[id];
        if (static_cast<int>(i) != members.back()) continue;
        std::set<int> set(members.begin(), members.end());
        // Convexity: no node between the first and last member reads a member's value.
        for (int u = members.front(); u < static_cast<int>(i); ++u)
          if (!set.count(u))
            for (ValueId in : g.nodes[u].inputs)
              if (set.count(g.value(in).producer))
                throw std::logic_error("fusion group " + std::to_string(id) +
                                       " is read before its kernel runs");
        for (int m : members)
          if (escapes(g, set, g.nodes[m].output)) assign_buffer(g.nodes[m].output);
        ctx.set_current_nodes(members);
        emit_group(ctx, members);
        continue;
      }
      if (node.op == OpKind::kReshape && !ctx.has_buffer(node.output) &&
          ctx.has_buffer(node.inputs[0])) {
        // No kernel: the input's buffer (Note [Reshapes are aliases]).
        ctx.set_buffer(node.output, ctx.buffer_of(node.inputs[0]));
        continue;
      }
      assign_buffer(node.output);
      switch (op_info(node.op).category) {
        case OpCategory::kCreate:
        case OpCategory::kCast:
        case OpCategory::kUnary:
        case OpCategory::kBinary:
        case OpCategory::kCompare:
        case OpCategory::kWhere:
          emit_pointwise_node(ctx, node);
          break;
        case OpCategory::kMatmul:
          emit_matmul_node(ctx, node);
          break;
        case OpCategory::kReduce:
          emit_reduce_node(ctx, node);
          break;
        case OpCategory::kLayout:
          emit_layout_node(ctx, node);
          break;
        case OpCategory::kIndex:
          emit_index_node(ctx, node);
          break;
        case OpCategory::kGrouped:
          emit_grouped_experts_node(ctx, node);
          break;
      }
    } catch (const std::invalid_argument& e) {
      throw UnsupportedError(e.what());
    }
  }
  ctx.set_current_node(-1);
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    if (!needs_copy[j]) continue;
    const TensorType& t = g.tensor(g.outputs[j]);
    emit_copy(ctx, t, ctx.buffer_of(g.outputs[j]), t.dtype,
              {BufferRef::kOutput, static_cast<int>(j)});
  }
  return ctx.finish(
      "// Generated by dyngen. One translation unit per graph.\n"
      "#include \"dg_device.cuh\"\n#include \"dg_ops.cuh\"\n"
      "#include \"dg_vec.cuh\"\n#include \"dg_epilogue.cuh\"\n" +
      std::string(ctx.has_tensor_maps() ? "#include \"dg_gemm_sm90.cuh\"\n" : "") + "\n");
}

}  // namespace dg
