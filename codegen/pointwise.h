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
  std::string prologue;  // statements before the loads (may `continue`)
  std::string value;     // expression over v0, v1, ...
  bool atomic_add = false;  // accumulate into out instead of storing
};

void emit_pointwise(LoweringContext& ctx, const PointwiseKernel& k);

}  // namespace dg
