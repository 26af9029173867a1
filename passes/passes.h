// Graph-to-graph passes. Each is a free function that returns its input unchanged (structurally)
// when nothing applies; the order they run in is in pipeline.cc.
#pragma once
#include "ir/graph.h"

namespace dg {

// Removes nodes whose results no output depends on.
Graph eliminate_dead_code(const Graph& g);
// Merges nodes with the same op, operands and attributes (e.g. PEFT's repeated x.to(f32)).
Graph eliminate_common_subexpressions(const Graph& g);
// Drops casts to the same dtype and exact round trips such as bf16 -> f32 -> bf16.
Graph fold_casts(const Graph& g);
// permute(permute(x)) as one permute, or x when they cancel.
Graph fold_permutes(const Graph& g);
// Weight gradients (K = the token count) as one split-over-tokens group (Note [Weight-gradient
// groups] in split_weight_grads.cc).
Graph split_weight_grads(const Graph& g);
// matmul(x * c, B) -> matmul(x, B) * c for a power-of-two constant c (exact).
Graph hoist_gemm_scale(const Graph& g);
// Products that are only summed as one GEMM over the concatenated K (Note [K-concatenated
// GEMMs] in concat_gemm_k.cc).
Graph concat_gemm_k(const Graph& g);

// Fusion passes (Note [Fusion groups] in ir/fusion.h): each assigns nodes to kernels.
// PEFT's LoRA linear as one GEMM with a rank-r epilogue, the rank-r product its own group.
Graph fuse_lora_linear(const Graph& g);
// GEMMs sharing their input as one GEMM with two B operands (SwiGLU gate/up, LoRA A products).
Graph fuse_gate_up(const Graph& g);
// View chains (reshape / permute / slice / expand) of GEMM operands read in place.
Graph fuse_operand_views(const Graph& g);
// Elementwise chains into one kernel, and into the prologue / epilogue of GEMM kernels.
Graph fuse_pointwise(const Graph& g);
// GEMM operands concatenated along K read in place, one K segment after another.
Graph fuse_concat_operands(const Graph& g);
// Producers read only by one GEMM group's epilogue (elementwise work, rank-r GEMMs) move into it.
Graph fuse_epilogue_producers(const Graph& g);
// Independent GEMM groups with the same M, N, K and dtypes as one launch, a problem per
// blockIdx.z (Note [Grouped GEMMs] in group_independent_gemms.cc).
Graph group_independent_gemms(const Graph& g);

}  // namespace dg
