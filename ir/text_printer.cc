#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "ir/text_format.h"

namespace dg {

std::string print_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  std::string s(buf);
  // Shortest representation that parses back to the same double.
  for (int prec = 1; prec < 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) {
      s = buf;
      break;
    }
  }
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

namespace {
std::string join_syms(const std::vector<SymExpr>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + xs[i].to_string();
  return s;
}
std::string bound(int64_t v) {
  if (v == Interval::kPosInf) return "inf";
  if (v == Interval::kNegInf) return "-inf";
  return std::to_string(v);
}
}  // namespace

std::string print_attr_value(const AttrValue& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* f = std::get_if<double>(&v)) return print_float(*f);
  if (auto* d = std::get_if<DType>(&v)) return std::string(dtype_name(*d));
  if (auto* is = std::get_if<std::vector<int64_t>>(&v)) {
    std::string s = "[";
    for (size_t k = 0; k < is->size(); ++k) s += (k ? ", " : "") + std::to_string((*is)[k]);
    return s + "]";
  }
  return "sym[" + join_syms(std::get<std::vector<SymExpr>>(v)) + "]";
}

std::string print_graph(const Graph& g) {
  std::unordered_map<ValueId, int> number;
  int next = 0;
  auto name = [&](ValueId id) {
    auto it = number.find(id);
    return it == number.end() ? "%?" + std::to_string(id) : "%" + std::to_string(it->second);
  };
  std::string out = "graph @" + (g.name.empty() ? std::string("graph") : g.name) + "\n";
  for (const SymExpr& s : g.symbols) {
    Interval r = s.symbol_range();
    out += "sym " + s.symbol_name() + " in [" + bound(r.lo) + ", " + bound(r.hi) + "] div " +
           std::to_string(s.symbol_divisor()) + "\n";
  }
  for (ValueId id : g.inputs) {
    number[id] = next++;
    const Value& v = g.value(id);
    out += "input " + name(id) + ": ";
    out += v.kind == ValueKind::kSymInt ? "sym " + v.sym_value.to_string() : v.type.to_string();
    out += "\n";
  }
  for (const Node& n : g.nodes) {
    number[n.output] = next++;
    out += name(n.output) + ": " + g.tensor(n.output).to_string() + " = ";
    out += std::string(op_name(n.op)) + "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) out += (i ? ", " : "") + name(n.inputs[i]);
    out += ")";
    if (!n.attrs.entries().empty()) {
      out += " {";
      bool first = true;
      for (auto& [k, v] : n.attrs.entries()) {
        out += (first ? "" : ", ") + k + " = " + print_attr_value(v);
        first = false;
      }
      out += "}";
    }
    out += "\n";
  }
  out += "output ";
  for (size_t i = 0; i < g.outputs.size(); ++i) out += (i ? ", " : "") + name(g.outputs[i]);
  return out + "\n";
}

}  // namespace dg
