// The textual form of a graph. Printer and parser round-trip: print(parse(print(g))) == print(g).
//
// Note [IR text form]
//   graph @expert_mlp
//   sym s0 in [2, inf] div 1
//   input %0: bf16[s0, 2048]
//   input %1: sym s0
//   %2: bf16[s0, 1024] = linear(%0, %3)
//   %5: f32[] = constant() {dtype = f32, value = 2.0}
//   %6: bf16[s0, 2048] = reshape(%4) {shape = sym[s0, 2048]}
//   output %2
// The printer numbers values densely in definition order (inputs first), so printing is
// canonical for a given graph; the parser accepts any `%name`. Attribute values: integers,
// floats (always with '.', 'e', 'inf' or 'nan'), integer lists `[1, 2]`, symbolic lists
// `sym[s0, 2*s0 + 1]`, and dtypes. Symbolic expressions use + - * and the functions
// floordiv, mod, max, min. Lines starting with '#' are comments.
#pragma once
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace dg {

std::string print_graph(const Graph& g);

struct ParseResult {
  Graph graph;
  std::string error;  // "line N: message" on failure
  bool ok() const { return error.empty(); }
};

// Parses and verifies (verify_graph) the text form.
ParseResult parse_graph_text(std::string_view text);

// Helpers shared by the printer and other emitters.
std::string print_attr_value(const AttrValue& v);
std::string print_float(double v);

}  // namespace dg
