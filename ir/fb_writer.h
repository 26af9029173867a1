// Serializes a graph to graph.fb bytes (schema: ir/graph.fbs).
#pragma once
#include <string>

#include "ir/graph.h"

namespace dg {

// The graph as graph.fb bytes. Deterministic: the same graph gives the same bytes in every
// process (expressions are emitted in a fixed walk over the graph, deduplicated by their
// interned node). Throws std::invalid_argument when an expression uses a symbol that the graph
// does not declare (such a graph fails verify_graph too).
std::string write_graph_fb(const Graph& g);

}  // namespace dg
