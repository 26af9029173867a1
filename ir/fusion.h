// Fusion groups: which nodes run together in one kernel. Set by the fusion passes (passes/fuse_*),
// read by codegen (codegen/emit_group.cc).
//
// Note [Fusion groups]
// A group is a set of nodes carrying the same attribute `fusion = G` (G >= 1); the text form
// prints it like any attribute, e.g. `%9: bf16[s0, 1024] = silu(%8) {fusion = 2}`. Codegen lowers
// each group as ONE kernel; a value made inside a group gets a buffer only when something outside
// the group (or the graph's output list) reads it, so a fused intermediate costs no memory.
// A group has one of two shapes:
// - GEMM group: one or two matmul / linear nodes (the anchors) that read the same A operand and
//   have the same N and K (two anchors = the horizontal gate/up fusion: one A tile, two B tiles);
//   a cast feeding the anchors' A operand (the prologue, read in the GEMM's own loads); reshape /
//   permute / slice / expand chains feeding an operand from a buffer (read in place through
//   strides, no copy kernel); and the epilogue: elementwise ops, casts, and matmul / linear nodes
//   marked `epilogue_matmul = 1` whose small K is static (LoRA's rank-r update B(t)), each over the
//   anchors' output shape, evaluated per output element from the fp32 accumulators.
// - Grouped GEMM group (members carry `gemm_problem = P`, P = 0, 1, ...): several GEMM groups
//   with the same M, N, K and dtypes that do not depend on each other, one launch for all of them
//   (Note [Grouped GEMMs] in passes/group_independent_gemms.cc). The members of one problem form
//   a GEMM group as above, with its own operands, epilogue and outputs.
// - Pointwise group: elementwise ops and casts over one shape, one kernel, several outputs.
// - Weight-gradient group (members carry `split_tokens = C`): matmuls whose K is the token count
//   and their operand prologues, lowered as two kernels (Note [Weight-gradient groups] in
//   passes/split_weight_grads.cc).
// Rank-0 constants are never members; kernels spell them as literals (Note [Inlined constants]).
// Every member computes what the unfused node computes, with the same rounding: each value is
// rounded to its own dtype where the unfused graph would store it (a bf16 linear's result is
// rounded to bf16 before the epilogue reads it, as PyTorch's separate kernels would).
// The passes only group nodes when the result is legal for every binding of the symbols (shapes
// and strides are compared as symbolic expressions, alignment is a static divisor), so one compile
// serves every token count. Groups are convex (no path leaves a group and comes back) and the
// passes leave each group's members next to each other in node order.
#pragma once
#include "ir/graph.h"

namespace dg {

// The reductions a fusion group may hold (Note [Fusion groups]). cumsum is in the kReduce category
// but is a scan, not a reduction over a dim: it keeps a kernel of its own.
inline bool fusable_reduction(OpKind op) {
  return op == OpKind::kSum || op == OpKind::kMean || op == OpKind::kAmax;
}

inline constexpr const char* kFusionAttr = "fusion";
inline constexpr const char* kEpilogueMatmulAttr = "epilogue_matmul";
inline constexpr const char* kSplitTokensAttr = "split_tokens";
inline constexpr const char* kGemmProblemAttr = "gemm_problem";

// The node's fusion group, 0 when it has none.
inline int64_t fusion_group(const Node& n) { return n.attrs.get_int(kFusionAttr).value_or(0); }
// A member of a weight-gradient group.
inline bool is_wgrad_member(const Node& n) { return n.attrs.has(kSplitTokensAttr); }
// The problem of a grouped GEMM group this node belongs to, -1 when it is in no such group.
inline int64_t gemm_problem(const Node& n) {
  return n.attrs.get_int(kGemmProblemAttr).value_or(-1);
}
inline bool is_epilogue_matmul(const Node& n) {
  return n.attrs.get_int(kEpilogueMatmulAttr).value_or(0) != 0;
}

}  // namespace dg
