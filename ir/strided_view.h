// Views as strides: what a chain of reshape / permute / slice / expand makes of a contiguous
// buffer, so a kernel can read the view in place instead of copying it (Note [Fusion groups]).
#pragma once
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace dg {

struct StridedView {
  ValueId base = -1;             // the value whose (contiguous) buffer the view reads
  std::vector<SymExpr> shape;    // the view's shape
  std::vector<SymExpr> strides;  // in elements of the base buffer
  SymExpr offset;                // in elements
  std::vector<int> nodes;        // the layout nodes of the chain, producer first
};

// `v` as a view of the nearest value up its chain of reshape / permute / slice / expand nodes that
// no such node produces. nullopt when a reshape in the chain cannot be written as strides (it
// merges dims that are not contiguous, or splits or merges symbolic ones).
std::optional<StridedView> strided_view_of(const Graph& g, ValueId v);

}  // namespace dg
