// Result types of the grouped-experts ops (Note [Grouped experts ops]).
#pragma once
#include <vector>

#include "ir/shape_infer.h"

namespace dg {

InferResult infer_grouped(const Graph& g, OpKind kind, const std::vector<ValueId>& in,
                          const Attrs& attrs);

}  // namespace dg
