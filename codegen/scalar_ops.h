// How each elementwise op is spelled in generated code, as one table (see scalar_ops.cc).
#pragma once
#include <string>
#include <vector>

#include "ir/op.h"

namespace dg {

// The C expression computing `op` on already-loaded operands in the compute type;
// empty if the op is not elementwise.
std::string scalar_expr(OpKind op, const std::vector<std::string>& args);

}  // namespace dg
