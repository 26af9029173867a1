// Random valid graphs for property tests of the exchange format: every op of the catalog with
// random operands and attributes (empty lists, 0-d tensors, symbolic shapes, -0.0, inf, nan),
// kept only where GraphBuilder's type inference accepts them, so each graph is one the frontend
// could have sent.
#pragma once
#include <cstdint>

#include "ir/graph.h"

namespace dg::testing {

// A graph with up to `max_nodes` nodes, determined by `seed` alone.
Graph random_graph(uint64_t seed, int max_nodes = 12);

}  // namespace dg::testing
