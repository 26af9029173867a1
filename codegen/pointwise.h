// Internal: one builder for every kernel that computes each output element independently
// (elementwise math, casts, fills, layout copies, gathers, scatters).
#pragma once
#include <string>
#include <vector>

#include "codegen/lowering.h"

namespace dg {

struct PointwiseOperand {
  BufferRef buffer;
  DType dtype;
  std::string offset;  // C expression over i0..i{r-1}; empty: pointer only (named p<k>)
};

struct PointwiseKernel {
  std::string what;     // short name part, e.g. "silu"
  std::string summary;  // one line for humans
  BufferRef out;
  DType out_dtype;
  std::vector<SymExpr> shape;  // the iteration space
  std::string out_offset = "i";
  std::vector<PointwiseOperand> operands;  // loaded into v0, v1, ... in compute_type
  std::string compute_type = "float";
  std::string prologue;     // statements before the loads (may `continue`)
  std::string value;        // expression over v0, v1, ...
  bool atomic_add = false;  // accumulate into out instead of storing
};

void emit_pointwise(LoweringContext& ctx, const PointwiseKernel& k);

// A rank-0 `constant` operand as a literal in `compute_type`, rounded to the constant's own dtype
// first (Note [Inlined constants]); false when `v` is not such a constant.
bool constant_literal(const Graph& g, ValueId v, const std::string& compute_type,
                      std::string* literal_out);
// The dtype whose compute type an elementwise op works in: the promotion of its data operands.
DType operand_dtype(const Graph& g, const Node& node);

}  // namespace dg
