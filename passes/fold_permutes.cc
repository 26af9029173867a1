// fold_permutes: permute(permute(x, p), q) becomes permute(x, p o q), or x itself when that is the
// identity. AOTAutograd hands weight gradients back as permute(permute(mm)) (the transpose of a
// transposed adapter weight); without this each would be a copy kernel.
#include "passes/graph_copier.h"
#include "passes/passes.h"

namespace dg {

Graph fold_permutes(const Graph& g) {
  GraphCopier copier(g);
  bool changed = false;
  for (const Node& n : g.nodes) {
    int p = n.op == OpKind::kPermute ? g.value(n.inputs[0]).producer : -1;
    if (p < 0 || g.nodes[p].op != OpKind::kPermute) {
      copier.copy_node(n);
      continue;
    }
    const std::vector<int64_t> first = *g.nodes[p].attrs.get_ints("dims");
    const std::vector<int64_t> second = *n.attrs.get_ints("dims");
    std::vector<int64_t> composed(second.size());
    bool identity = true;
    for (size_t i = 0; i < second.size(); ++i) {
      composed[i] = first[static_cast<size_t>(second[i])];
      identity = identity && composed[i] == static_cast<int64_t>(i);
    }
    ValueId x = copier.map(g.nodes[p].inputs[0]);
    if (identity) {
      copier.alias(n.output, x);
    } else {
      Attrs attrs = n.attrs;
      attrs.set("dims", composed);
      copier.alias(n.output, copier.add_node(OpKind::kPermute, {x}, attrs, g.tensor(n.output)));
    }
    changed = true;
  }
  return changed ? eliminate_dead_code(copier.finish()) : g;
}

}  // namespace dg
