#include "passes/graph_copier.h"
#include "passes/passes.h"

namespace dg {

namespace {
// True when every value of `from` is exactly representable in `to`.
bool widens_exactly(DType from, DType to) {
  if (from == to) return true;
  switch (from) {
    case DType::kBF16:
    case DType::kF16:
      return to == DType::kF32 || to == DType::kF64;
    case DType::kF32:
      return to == DType::kF64;
    case DType::kBool:
      return true;
    case DType::kI32:
      return to == DType::kI64 || to == DType::kF64;
    default:
      return false;
  }
}
}  // namespace

Graph fold_casts(const Graph& g) {
  GraphCopier copier(g);
  for (const Node& node : g.nodes) {
    if (node.op != OpKind::kCast) {
      copier.copy_node(node);
      continue;
    }
    ValueId src = node.inputs[0];
    DType to = g.tensor(node.output).dtype;
    if (g.tensor(src).dtype == to) {  // cast to the same dtype
      copier.alias(node.output, copier.map(src));
      continue;
    }
    const Value& sv = g.value(src);
    if (sv.producer >= 0 && g.nodes[sv.producer].op == OpKind::kCast) {
      ValueId origin = g.nodes[sv.producer].inputs[0];
      DType mid = g.tensor(src).dtype, first = g.tensor(origin).dtype;
      if (widens_exactly(first, mid)) {
        // x -> wider -> to == x -> to: skip the exact intermediate.
        if (first == to) {
          copier.alias(node.output, copier.map(origin));
        } else {
          Attrs attrs = node.attrs;
          copier.alias(node.output, copier.add_node(OpKind::kCast, {copier.map(origin)}, attrs,
                                                    g.tensor(node.output)));
        }
        continue;
      }
    }
    copier.copy_node(node);
  }
  return copier.finish();
}

}  // namespace dg
