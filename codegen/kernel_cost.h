// What a kernel costs, as symbolic expressions over the graph's symbols: the FLOPs of the nodes
// it computes and the global-memory bytes of the buffers it touches.
//
// Note [Kernel cost model]
// FLOPs come from the kernel's nodes (KernelLaunch::nodes): a contraction counts 2 per
// multiply-add (2 * numel(out) * K), an elementwise op or a reduction 1 per element it reads or
// writes, casts, fills and data movement 0. Contractions over bf16/f16 operands are also counted
// in `tensor_flops` (eligible for tensor cores); the rest run at the SIMT rate.
// Bytes are the compulsory traffic: every distinct buffer of KernelLaunch::buffers once, at its
// full size, except where the kernel's nodes touch only part of it -- a slice or index_select
// reads as many elements as it produces, and one part of a cat writes as much as it reads.
// Re-reads (GEMM tiles, broadcast operands) are not counted: this is the roofline's traffic, so a
// fused kernel costs exactly what it keeps out of memory less. Emitters of fused kernels only
// fill `nodes` and `buffers`; LoweringContext::add_kernel computes the rest.
#pragma once
#include <functional>
#include <optional>

#include "codegen/kernel_plan.h"
#include "ir/graph.h"

namespace dg {

struct NodeFlops {
  SymExpr flops;         // all floating-point operations
  SymExpr tensor_flops;  // the part in bf16/f16 contractions
};

NodeFlops node_flops(const Graph& g, const Node& node);

// The size in bytes of a buffer (graph input, graph output or workspace slot).
using BufferBytesFn = std::function<SymExpr(BufferRef)>;
// The buffer a value lives in, or nullopt (an inlined constant, a value kept in registers).
using BufferOfFn = std::function<std::optional<BufferRef>(ValueId)>;

// Fills launch->flops, tensor_flops and bytes from launch->nodes and launch->buffers.
void compute_kernel_cost(const Graph& g, const BufferBytesFn& buffer_bytes,
                         const BufferOfFn& buffer_of, KernelLaunch* launch);

}  // namespace dg
