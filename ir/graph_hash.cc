#include "ir/graph_hash.h"

#include <map>

#include "ir/sha256.h"
#include "ir/text_format.h"

namespace dg {

Graph canonicalize_symbols(const Graph& g) {
  std::map<std::string, SymExpr> renamed;  // old name -> new symbol
  auto note = [&](const SymExpr& e) {
    for (const SymExpr& s : e.free_symbols()) {
      if (renamed.count(s.symbol_name())) continue;
      Interval r = s.symbol_range();
      std::string fresh = "s" + std::to_string(renamed.size());
      renamed.emplace(s.symbol_name(), SymExpr::symbol(fresh, r.lo, r.hi, s.symbol_divisor()));
    }
  };
  auto rename = [&](const SymExpr& e) {
    note(e);
    return e.substitute([&](const SymExpr& s) { return renamed.at(s.symbol_name()); });
  };
  Graph out = g;
  out.name = "graph";
  for (ValueId id : g.inputs) {
    Value& v = out.values[id];
    if (v.kind == ValueKind::kSymInt) v.sym_value = rename(v.sym_value);
    for (auto& d : v.type.shape) d = rename(d);
  }
  for (Node& n : out.nodes) {
    Attrs attrs;
    for (auto& [k, v] : n.attrs.entries()) {
      if (auto* syms = std::get_if<std::vector<SymExpr>>(&v)) {
        std::vector<SymExpr> r;
        for (auto& e : *syms) r.push_back(rename(e));
        attrs.set(k, r);
      } else {
        attrs.set(k, v);
      }
    }
    n.attrs = attrs;
    for (auto& d : out.values[n.output].type.shape) d = rename(d);
  }
  // Declared symbols that no value uses keep their facts and come last, in declaration order.
  for (const SymExpr& s : g.symbols) note(s);
  out.symbols.clear();
  std::vector<SymExpr> ordered(renamed.size());
  for (auto& [old, fresh] : renamed) ordered[std::stoi(fresh.symbol_name().substr(1))] = fresh;
  out.symbols = ordered;
  return out;
}

std::string hash_canonical_graph(const Graph& canonical) {
  return sha256_hex(print_graph(canonical));
}

std::string graph_hash(const Graph& g) { return hash_canonical_graph(canonicalize_symbols(g)); }

}  // namespace dg
