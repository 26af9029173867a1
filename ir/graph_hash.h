// Canonical graph hash (see Note [Canonical graph hash]).
#pragma once
#include <string>

#include "ir/graph.h"

namespace dg {

// Note [Canonical graph hash]
// The hash is SHA-256 over the printed text of the canonical form: symbols renamed s0, s1, ...
// in order of first use (inputs first, then nodes), values numbered densely by the printer, the
// graph's name dropped. Identical graphs from different processes, experts or layers (whose
// Dynamo symbols are named s77, s12, ...) therefore share one hash and one compile; any change to
// an op, a dtype, a static dim, a symbol's facts or an attribute changes the text and the hash.
Graph canonicalize_symbols(const Graph& g);
std::string graph_hash(const Graph& g);  // hash_canonical_graph(canonicalize_symbols(g))
// The hash of a graph canonicalize_symbols already returned, for a caller that keeps the
// canonical form (the compile path compiles it): the same value as graph_hash of the original.
std::string hash_canonical_graph(const Graph& canonical);

}  // namespace dg
