#include "ir/graph.h"

#include <stdexcept>

#include "ir/shape_infer.h"

namespace dg {

SymExpr TensorType::numel() const {
  SymExpr n(1);
  for (auto& d : shape) n = n * d;
  return n;
}

std::vector<SymExpr> TensorType::contiguous_strides() const {
  std::vector<SymExpr> strides(shape.size());
  SymExpr s(1);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s = s * shape[i];
  }
  return strides;
}

std::string TensorType::to_string() const {
  std::string s(dtype_name(dtype));
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i].to_string();
  }
  return s + "]";
}

GraphBuilder::GraphBuilder(std::string name) { g_.name = std::move(name); }

SymExpr GraphBuilder::symbol(const std::string& name, int64_t lo, int64_t hi, int64_t divisor) {
  SymExpr s = SymExpr::symbol(name, lo, hi, divisor);
  g_.symbols.push_back(s);
  return s;
}

ValueId GraphBuilder::input(DType dtype, std::vector<SymExpr> shape) {
  Value v;
  v.type = TensorType{dtype, std::move(shape)};
  g_.values.push_back(std::move(v));
  ValueId id = static_cast<ValueId>(g_.values.size() - 1);
  g_.inputs.push_back(id);
  return id;
}

ValueId GraphBuilder::sym_input(const SymExpr& value) {
  Value v;
  v.kind = ValueKind::kSymInt;
  v.sym_value = value;
  g_.values.push_back(std::move(v));
  ValueId id = static_cast<ValueId>(g_.values.size() - 1);
  g_.inputs.push_back(id);
  return id;
}

ValueId GraphBuilder::op(OpKind kind, std::vector<ValueId> inputs, Attrs attrs) {
  for (ValueId in : inputs)
    if (in < 0 || static_cast<size_t>(in) >= g_.values.size())
      throw std::invalid_argument(std::string(op_name(kind)) + ": operand id out of range");
  auto inferred = infer_type(g_, kind, inputs, attrs);
  if (!inferred.ok()) throw std::invalid_argument(inferred.error);
  Value v;
  v.type = inferred.type;
  v.producer = static_cast<int>(g_.nodes.size());
  g_.values.push_back(std::move(v));
  ValueId id = static_cast<ValueId>(g_.values.size() - 1);
  g_.nodes.push_back(Node{kind, std::move(inputs), std::move(attrs), id});
  return id;
}

void GraphBuilder::output(ValueId v) { g_.outputs.push_back(v); }

Graph GraphBuilder::finish() { return std::move(g_); }

}  // namespace dg
