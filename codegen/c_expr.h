// Spelling symbolic expressions as C/CUDA integer expressions.
#pragma once
#include <string>

#include "ir/sym_expr.h"

namespace dg {

// The kernel parameter that carries a symbol's value.
std::string symbol_param(const SymExpr& symbol);
// A `long long` C expression; floordiv/mod/max/min use the dg_* helpers of dg_index.cuh.
std::string c_expr(const SymExpr& e);
// A floating-point literal of C type `type` ("float" or "double"), inf and nan included.
std::string c_float(double v, const std::string& type = "float");

}  // namespace dg
