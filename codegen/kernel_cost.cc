#include "codegen/kernel_cost.h"

#include <algorithm>

#include "codegen/grouped_experts.h"

namespace dg {

namespace {

bool low_precision(DType t) { return t == DType::kBF16 || t == DType::kF16; }

}  // namespace

NodeFlops node_flops(const Graph& g, const Node& node) {
  const TensorType& out = g.tensor(node.output);
  NodeFlops f{SymExpr(0), SymExpr(0)};
  switch (op_info(node.op).category) {
    case OpCategory::kMatmul: {
      // linear: [M, K] x [N, K]^T; matmul: [..., M, K] x [..., K, N]. Either way each output
      // element is a K-long dot product of the first operand's last dim.
      const TensorType& a = g.tensor(node.inputs[0]);
      const TensorType& b = g.tensor(node.inputs[1]);
      SymExpr k = a.shape.empty() ? SymExpr(1) : a.shape.back();
      SymExpr contraction = SymExpr(2) * out.numel() * k;
      f.flops = contraction;
      if (low_precision(a.dtype) && low_precision(b.dtype)) f.tensor_flops = contraction;
      if (node.inputs.size() == 3) f.flops = f.flops + out.numel();  // bias
      return f;
    }
    case OpCategory::kUnary:
    case OpCategory::kBinary:
    case OpCategory::kCompare:
    case OpCategory::kWhere:
      f.flops = out.numel();
      return f;
    case OpCategory::kReduce:
      f.flops = g.tensor(node.inputs[0]).numel();
      return f;
    case OpCategory::kIndex:
      if (node.op == OpKind::kIndexAdd) f.flops = g.tensor(node.inputs[2]).numel();
      return f;
    case OpCategory::kGrouped: {
      // grouped_mm: every routed row meets one expert's weight, so 2 R N K whatever the routing;
      // grouped_mm_wgrad: the same contraction over R. Routing is integer work (no flops). The
      // bytes (compute_kernel_cost) count every expert's weight once: the worst case, the rows
      // spread over all experts.
      if (node.op != OpKind::kGroupedMm && node.op != OpKind::kGroupedMmWgrad) return f;
      const TensorType& a = g.tensor(node.inputs[0]);  // a[R, K] or g[R, N]
      const TensorType& b = g.tensor(node.inputs[1]);  // offs, or x[R, K]
      f.flops = node.op == OpKind::kGroupedMm ? SymExpr(2) * a.shape[0] * out.shape[1] * a.shape[1]
                                              : SymExpr(2) * a.shape[0] * a.shape[1] * b.shape[1];
      // Only grouped_mm's bf16 kernels run on tensor cores (mma.sync, or wgmma on sm_90a); the
      // weight gradient and the scalar grouped tile run on FMA (codegen/emit_grouped_mm.cc). The
      // FLOPs are the useful ones: the rows a tile multiplies past its segment's end (each
      // expert's last row tile, on average half empty) are not counted.
      if (grouped_mm_on_tensor_cores(g, node)) f.tensor_flops = f.flops;
      return f;
    }
    case OpCategory::kCreate:
    case OpCategory::kCast:
    case OpCategory::kLayout:
      return f;
  }
  return f;
}

void compute_kernel_cost(const Graph& g, const BufferBytesFn& buffer_bytes,
                         const BufferOfFn& buffer_of, KernelLaunch* launch) {
  launch->flops = SymExpr(0);
  launch->tensor_flops = SymExpr(0);
  for (int n : launch->nodes) {
    const Node& node = g.nodes.at(n);
    NodeFlops f = node_flops(g, node);
    if (launch->split_terms > 0 && op_info(node.op).category == OpCategory::kMatmul)
      f.tensor_flops = f.flops;  // f32 on tensor cores (KernelLaunch::split_terms)
    launch->flops = launch->flops + f.flops;
    launch->tensor_flops = launch->tensor_flops + f.tensor_flops;
  }

  std::vector<BufferRef> seen;
  launch->bytes = SymExpr(0);
  for (const BufferRef& b : launch->buffers) {
    if (std::find(seen.begin(), seen.end(), b) != seen.end()) continue;
    seen.push_back(b);
    // Partial accesses of this buffer by the kernel's nodes; any full access wins.
    SymExpr partial(0);
    bool any_partial = false, any_full = false;
    for (int n : launch->nodes) {
      const Node& node = g.nodes.at(n);
      const TensorType& out = g.tensor(node.output);
      std::optional<BufferRef> ob = buffer_of(node.output);
      // A node writes all of its output (cat too: one kernel copies every operand).
      if (ob && *ob == b) any_full = true;
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        std::optional<BufferRef> ib = buffer_of(node.inputs[j]);
        if (!ib || !(*ib == b)) continue;
        bool narrowing = j == 0 && (node.op == OpKind::kSlice || node.op == OpKind::kIndexSelect);
        if (!narrowing) {
          any_full = true;
          continue;
        }
        any_partial = true;
        partial = partial + out.numel() * SymExpr(dtype_size(g.tensor(node.inputs[j]).dtype));
      }
    }
    launch->bytes = launch->bytes + (any_partial && !any_full ? partial : buffer_bytes(b));
  }
}

}  // namespace dg
