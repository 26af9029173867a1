#include "passes/graph_copier.h"

namespace dg {

GraphCopier::GraphCopier(const Graph& src) : src_(src), map_(src.values.size(), -1) {
  out_.name = src.name;
  out_.symbols = src.symbols;
  for (ValueId in : src.inputs) {
    out_.values.push_back(src.value(in));
    ValueId id = static_cast<ValueId>(out_.values.size() - 1);
    out_.inputs.push_back(id);
    map_[in] = id;
  }
}

ValueId GraphCopier::add_node(OpKind op, std::vector<ValueId> new_inputs, Attrs attrs,
                              TensorType type) {
  Value v;
  v.type = std::move(type);
  v.producer = static_cast<int>(out_.nodes.size());
  out_.values.push_back(std::move(v));
  ValueId id = static_cast<ValueId>(out_.values.size() - 1);
  out_.nodes.push_back(Node{op, std::move(new_inputs), std::move(attrs), id});
  return id;
}

ValueId GraphCopier::copy_node(const Node& n) {
  std::vector<ValueId> inputs;
  for (ValueId in : n.inputs) inputs.push_back(map(in));
  ValueId id = add_node(n.op, std::move(inputs), n.attrs, src_.tensor(n.output));
  map_[n.output] = id;
  return id;
}

Graph GraphCopier::finish() {
  for (ValueId o : src_.outputs) out_.outputs.push_back(map(o));
  return std::move(out_);
}

}  // namespace dg
