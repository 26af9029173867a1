// Result type of each op from its operands and attributes. The builder uses it to type new
// nodes; the verifier uses it to check the declared type of every node.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dg {

// The largest k of a `topk` node (Note [Top-k op] in ir/shape_infer.cc).
inline constexpr int64_t kTopkMaxK = 16;

struct InferResult {
  TensorType type;
  std::string error;  // empty on success
  bool ok() const { return error.empty(); }
};

InferResult infer_type(const Graph& g, OpKind kind, const std::vector<ValueId>& inputs,
                       const Attrs& attrs);

// PyTorch's promotion for two operands, where a rank-0 operand ("wrapped number") does not
// raise the result's dtype within its category.
DType promote_types(DType a, bool a_is_scalar, DType b, bool b_is_scalar);

// Broadcast two symbolic shapes (numpy rules); false if the dims cannot be proven compatible.
bool broadcast_shapes(const std::vector<SymExpr>& a, const std::vector<SymExpr>& b,
                      std::vector<SymExpr>* out);

}  // namespace dg
