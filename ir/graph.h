// The SSA graph: values (tensors or symbolic integers), nodes in topological order, inputs and
// outputs, and the symbols its dimensions are written in.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/dtype.h"
#include "ir/op.h"
#include "ir/sym_expr.h"

namespace dg {

using ValueId = int32_t;

struct TensorType {
  DType dtype = DType::kF32;
  std::vector<SymExpr> shape;
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
  int rank() const { return static_cast<int>(shape.size()); }
  SymExpr numel() const;
  // Row-major strides of a contiguous tensor of this shape.
  std::vector<SymExpr> contiguous_strides() const;
  std::string to_string() const;  // e.g. "bf16[s0, 2048]"
};

enum class ValueKind : uint8_t { kTensor = 1, kSymInt = 2 };

struct Value {
  ValueKind kind = ValueKind::kTensor;
  TensorType type;    // kTensor
  SymExpr sym_value;  // kSymInt: the integer this value holds
  int producer = -1;  // index of the producing node; -1 for graph inputs
};

struct Node {
  OpKind op;
  std::vector<ValueId> inputs;
  Attrs attrs;
  ValueId output = -1;
};

struct Graph {
  std::string name;              // informational; not part of the hash
  std::vector<SymExpr> symbols;  // declared symbols with their facts, in declaration order
  std::vector<Value> values;
  std::vector<ValueId> inputs;
  std::vector<Node> nodes;  // topological order
  std::vector<ValueId> outputs;

  const Value& value(ValueId id) const { return values.at(static_cast<size_t>(id)); }
  const TensorType& tensor(ValueId id) const { return value(id).type; }
};

// Builds a graph node by node, inferring each result's type; throws std::invalid_argument with
// a readable message when an op is applied to operands it does not accept.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name = "graph");
  // Declares a symbol with facts (see SymExpr::symbol) and returns it.
  SymExpr symbol(const std::string& name, int64_t lo = 2, int64_t hi = Interval::kPosInf,
                 int64_t divisor = 1);
  ValueId input(DType dtype, std::vector<SymExpr> shape);
  ValueId sym_input(const SymExpr& value);
  ValueId op(OpKind kind, std::vector<ValueId> inputs, Attrs attrs = {});
  void output(ValueId v);
  const Graph& graph() const { return g_; }
  Graph finish();

 private:
  Graph g_;
};

}  // namespace dg
