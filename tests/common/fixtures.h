// Graphs for tests: IR text parsed (a parse error fails the test), the shared fixtures of
// tests/fixtures as graphs, and the seed's expert graphs resized to other model shapes.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "tests/common/source_tree.h"

namespace dg::testing {

// The graph written in `text`; text that does not parse fails the test (and gives an empty graph).
Graph parse_or_fail(const std::string& text);
// The fixture tests/fixtures/NAME (IR text) as a graph.
Graph load_fixture(const std::string& name);

// `text` with every whole number `from` inside a shape's brackets replaced by `to`, the pairs
// applied in order (a size that is also another's new value goes through a placeholder first).
std::string replace_in_shapes(const std::string& text,
                              const std::vector<std::pair<std::string, std::string>>& from_to);

// A seed fixture (the forward or the backward expert MLP) with other sizes: hidden, ffn and LoRA
// rank replace 2048, 1024 and 16 inside shapes (the scaling 2.0 = alpha / r stays): the same
// kernels at a size the emulation runs quickly, or at another model's shape.
std::string resized_seed_text(const std::string& fixture, int64_t hidden, int64_t ffn,
                              int64_t rank);
// The same as a graph, with the token count s77 widened to [0, inf]: Dynamo specializes 0 and 1
// into graphs of their own, the numerics tests run them too.
Graph resized_seed(const std::string& fixture, int64_t hidden, int64_t ffn, int64_t rank);

}  // namespace dg::testing
