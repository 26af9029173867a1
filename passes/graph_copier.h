// Rebuilding a graph node by node: what every pass uses to produce its result.
#pragma once
#include <vector>

#include "ir/graph.h"

namespace dg {

// Copies `src`'s symbols and inputs into a new graph; the pass then copies, replaces or drops
// each node. Value ids of `src` are mapped to ids of the new graph.
class GraphCopier {
 public:
  explicit GraphCopier(const Graph& src);

  ValueId map(ValueId old) const { return map_.at(static_cast<size_t>(old)); }
  // From now on `old` stands for `replacement` (an id of the new graph).
  void alias(ValueId old, ValueId replacement) { map_.at(static_cast<size_t>(old)) = replacement; }
  // Copies `n` with its inputs mapped; returns the new id of its output.
  ValueId copy_node(const Node& n);
  ValueId add_node(OpKind op, std::vector<ValueId> new_inputs, Attrs attrs, TensorType type);
  const Graph& partial() const { return out_; }
  Graph finish();

 private:
  const Graph& src_;
  Graph out_;
  std::vector<ValueId> map_;
};

}  // namespace dg
