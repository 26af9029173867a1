#include "ir/verifier.h"

#include <set>
#include <unordered_set>

#include "ir/shape_infer.h"
#include "ir/sym_node.h"

namespace dg {
namespace {

std::string vid(ValueId id) { return "%" + std::to_string(id); }

// Checks that every symbol in `e` is one the graph declares (same name and facts).
std::string check_symbols(const SymExpr& e, const std::set<const SymNode*>& declared,
                          const std::string& where) {
  for (const SymExpr& s : e.free_symbols())
    if (!declared.count(s.node()))
      return where + " uses undeclared symbol " + s.symbol_name() + " (or one with other facts)";
  return "";
}

std::string check_type(const TensorType& t, const std::set<const SymNode*>& declared,
                       const VerifyLimits& limits, const std::string& where) {
  if (t.rank() > limits.max_rank)
    return where + " has rank " + std::to_string(t.rank()) + ", above the limit " +
           std::to_string(limits.max_rank);
  for (const SymExpr& d : t.shape) {
    if (auto err = check_symbols(d, declared, where); !err.empty()) return err;
    if (d.bounds().lo < 0) return where + " has a dimension that may be negative: " + d.to_string();
  }
  return "";
}

}  // namespace

std::string verify_graph(const Graph& g, const VerifyLimits& limits) {
  if (g.values.size() > static_cast<size_t>(limits.max_values)) return "graph has too many values";
  std::set<const SymNode*> declared;
  std::set<std::string> names;
  for (const SymExpr& s : g.symbols) {
    if (!s.is_symbol()) return "a declared symbol is not a symbol: " + s.to_string();
    if (!names.insert(s.symbol_name()).second)
      return "symbol " + s.symbol_name() + " declared twice";
    declared.insert(s.node());
  }

  std::vector<bool> defined(g.values.size(), false);
  auto in_range = [&](ValueId id) { return id >= 0 && static_cast<size_t>(id) < g.values.size(); };

  for (ValueId id : g.inputs) {
    if (!in_range(id)) return "graph input " + vid(id) + " does not exist";
    if (defined[id]) return "graph input " + vid(id) + " listed twice";
    const Value& v = g.value(id);
    if (v.producer != -1) return "graph input " + vid(id) + " has a producer";
    if (v.kind == ValueKind::kTensor) {
      if (auto e = check_type(v.type, declared, limits, "input " + vid(id)); !e.empty()) return e;
    } else if (v.kind == ValueKind::kSymInt) {
      if (auto e = check_symbols(v.sym_value, declared, "input " + vid(id)); !e.empty()) return e;
    } else {
      return "input " + vid(id) + " has an unknown kind";
    }
    defined[id] = true;
  }

  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    std::string where = std::string(op_name(node.op)) + " defining " + vid(node.output);
    for (ValueId in : node.inputs) {
      if (!in_range(in)) return where + ": operand " + vid(in) + " does not exist";
      if (!defined[in]) return where + ": operand " + vid(in) + " is used before it is defined";
    }
    if (!in_range(node.output))
      return "node " + std::to_string(n) + " defines a value out of range";
    if (defined[node.output]) return where + ": value defined twice";
    const Value& out = g.value(node.output);
    if (out.kind != ValueKind::kTensor || out.producer != static_cast<int>(n))
      return where + ": result is not a tensor produced by this node";
    for (auto& [name, attr] : node.attrs.entries())
      if (auto* syms = std::get_if<std::vector<SymExpr>>(&attr))
        for (auto& e : *syms)
          if (auto err = check_symbols(e, declared, where + " attribute " + name); !err.empty())
            return err;
    if (auto e = check_type(out.type, declared, limits, where); !e.empty()) return e;
    InferResult inferred = infer_type(g, node.op, node.inputs, node.attrs);
    if (!inferred.ok()) return where + ": " + inferred.error;
    if (inferred.type != out.type)
      return where + ": declared type " + out.type.to_string() + " but the op gives " +
             inferred.type.to_string();
    defined[node.output] = true;
  }

  for (size_t i = 0; i < g.values.size(); ++i)
    if (!defined[i]) return "value " + vid(static_cast<ValueId>(i)) + " is never defined";
  if (g.outputs.empty()) return "graph has no outputs";
  for (ValueId id : g.outputs) {
    if (!in_range(id) || !defined[id]) return "graph output " + vid(id) + " is not defined";
    if (g.value(id).kind != ValueKind::kTensor)
      return "graph output " + vid(id) + " is not a tensor";
  }
  return "";
}

}  // namespace dg
