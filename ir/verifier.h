// Semantic verifier: ids, use-before-def, declared symbols, arity, and every node's declared type
// against shape inference. Bytes from outside are checked structurally by the loader first.
#pragma once
#include <string>

#include "ir/graph.h"

namespace dg {

struct VerifyLimits {
  int max_rank = 8;
  int max_values = 1 << 20;
};

// Empty string when the graph is valid; otherwise the first problem found, naming the value.
std::string verify_graph(const Graph& g, const VerifyLimits& limits = {});

}  // namespace dg
