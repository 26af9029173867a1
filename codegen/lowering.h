// Internal: the state shared by the per-category kernel emitters while lowering one graph.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "codegen/emit_cuda.h"
#include "codegen/kernel_plan.h"
#include "ir/graph.h"

namespace dg {

class LoweringContext {
 public:
  LoweringContext(const Graph& g, const CodegenOptions& options);

  const Graph& graph() const { return g_; }
  const CodegenOptions& options() const { return options_; }
  BufferRef buffer_of(ValueId v) const { return buffer_of_.at(v); }
  void set_buffer(ValueId v, BufferRef b) { buffer_of_[v] = b; }
  bool has_buffer(ValueId v) const { return buffer_of_.count(v) != 0; }
  // A fresh workspace slot of `bytes` bytes (256-byte aligned).
  BufferRef workspace(const SymExpr& bytes, const std::string& what);
  // A unique kernel name such as "k3_linear".
  std::string kernel_name(const std::string& what);
  // "long long S_s0, long long S_s1" for the graph's symbols (with a leading comma if any).
  std::string symbol_params() const;
  // Adds a check made at every call (value >= 1) before anything is launched.
  void require_positive(const SymExpr& value, const std::string& message);
  // The node being lowered (an index into graph().nodes), or -1 between nodes.
  void set_current_node(int node) {
    current_nodes_.clear();
    if (node >= 0) current_nodes_.push_back(node);
  }
  // The nodes of the fusion group being lowered; empty between nodes.
  void set_current_nodes(std::vector<int> nodes) { current_nodes_ = std::move(nodes); }
  const std::vector<int>& current_nodes() const { return current_nodes_; }
  // Adds a kernel's source and launch record. An empty launch.nodes becomes the current node(s);
  // FLOPs and bytes are computed from nodes and buffers (Note [Kernel cost model]). A GEMM's
  // fallback kernel goes to the second translation unit (Note [Fallbacks compiled on first need]).
  void add_kernel(KernelLaunch launch, const std::string& source);

  // Whether a kernel added so far takes tensor maps (an sm_90a GEMM, Note [Tensor maps]).
  bool has_tensor_maps() const;

  KernelPlan finish(const std::string& prelude);

 private:
  const Graph& g_;
  CodegenOptions options_;
  KernelPlan plan_;
  std::map<ValueId, BufferRef> buffer_of_;
  std::string body_, fallback_body_;
  int kernel_count_ = 0;
  std::vector<int> current_nodes_;
};

// Per-category emitters; each lowers one node, writing its result to ctx.buffer_of(node.output).
void emit_pointwise_node(LoweringContext& ctx, const Node& node);
void emit_layout_node(LoweringContext& ctx, const Node& node);
void emit_matmul_node(LoweringContext& ctx, const Node& node);
void emit_reduce_node(LoweringContext& ctx, const Node& node);
void emit_index_node(LoweringContext& ctx, const Node& node);
void emit_grouped_experts_node(LoweringContext& ctx, const Node& node);
// topk (a kReduce op with a kernel of its own, codegen/emit_topk.cc).
void emit_topk(LoweringContext& ctx, const Node& node);
// Copies a tensor between buffers, converting to `to_dtype` (used when an output aliases an input
// or another output, and to round accumulators).
void emit_copy(LoweringContext& ctx, const TensorType& type, BufferRef from, DType to_dtype,
               BufferRef to);

// ---- helpers shared by the emitters ----
std::string ctype(DType t);
// The C type arithmetic happens in for an op over these dtypes (float for bf16/f16/f32).
std::string compute_ctype(DType t);
// Row-major strides of `in_shape` broadcast against `out_shape` (0 on broadcast dims).
std::vector<SymExpr> broadcast_strides(const std::vector<SymExpr>& in_shape,
                                       const std::vector<SymExpr>& out_shape);
// "base + i0*s0 + i1*s1 ..." over the output index variables i0..i{r-1}; zero strides skipped.
std::string offset_expr(const std::vector<SymExpr>& strides, const SymExpr& base = SymExpr(0),
                        const std::string& var = "i");
// The statements that split the index `linear` into <var>0..<var>{r-1} for `shape`.
std::string unravel(const std::vector<SymExpr>& shape, const std::string& linear = "i",
                    const std::string& var = "i");
// Grid for a grid-stride loop over n elements with 256-thread blocks.
std::array<SymExpr, 3> grid_for(const SymExpr& n, int block = 256);

}  // namespace dg
