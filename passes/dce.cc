#include <range/v3/view/filter.hpp>

#include "passes/graph_copier.h"
#include "passes/passes.h"

namespace dg {

Graph eliminate_dead_code(const Graph& g) {
  std::vector<bool> live(g.values.size(), false);
  for (ValueId o : g.outputs) live[o] = true;
  for (size_t n = g.nodes.size(); n-- > 0;) {
    const Node& node = g.nodes[n];
    if (!live[node.output]) continue;
    for (ValueId in : node.inputs) live[in] = true;
  }
  GraphCopier copier(g);
  auto is_live = [&](const Node& node) { return live[node.output]; };
  for (const Node& node : g.nodes | ranges::views::filter(is_live)) copier.copy_node(node);
  return copier.finish();
}

}  // namespace dg
