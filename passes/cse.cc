#include <map>
#include <range/v3/range/conversion.hpp>
#include <range/v3/view/transform.hpp>
#include <tuple>

#include "ir/text_format.h"
#include "passes/graph_copier.h"
#include "passes/passes.h"

namespace dg {

Graph eliminate_common_subexpressions(const Graph& g) {
  GraphCopier copier(g);
  // Key: op, mapped operands and printed attributes (attribute printing is canonical).
  std::map<std::tuple<OpKind, std::vector<ValueId>, std::string>, ValueId> seen;
  for (const Node& node : g.nodes) {
    auto mapped = [&](ValueId in) { return copier.map(in); };
    std::vector<ValueId> inputs =
        node.inputs | ranges::views::transform(mapped) | ranges::to<std::vector>();
    std::string attrs;
    for (auto& [k, v] : node.attrs.entries()) attrs += k + "=" + print_attr_value(v) + ";";
    auto key = std::make_tuple(node.op, inputs, attrs);
    auto it = seen.find(key);
    if (it != seen.end()) {
      copier.alias(node.output, it->second);
      continue;
    }
    seen.emplace(std::move(key), copier.copy_node(node));
  }
  return copier.finish();
}

}  // namespace dg
