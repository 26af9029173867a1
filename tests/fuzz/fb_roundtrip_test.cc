// Property: a graph dyngen writes loads again, and writing what was loaded gives the same bytes
// (writer -> loader -> writer), for every fixture, for graphs with 0-d tensors and empty list
// attributes, and for thousands of random graphs (tests/fuzz/random_graph.h). The fuzzer checks
// the same property from the loader's side (fuzz_graph_fb.cc).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "ir/fb_loader.h"
#include "ir/fb_writer.h"
#include "ir/graph_hash.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "tests/common/file_bytes.h"
#include "tests/fuzz/random_graph.h"

namespace dg {
namespace {

namespace fs = std::filesystem;

using dg::testing::read_all;

// Empty when `g` survives writer -> loader -> writer unchanged; else what differed, or why the
// writer refused the graph.
std::string round_trip_problem(const Graph& g) {
  std::string bytes;
  try {
    bytes = write_graph_fb(g);
  } catch (const std::invalid_argument& e) {
    return std::string("refused: ") + e.what();
  }
  LoadResult r = load_graph_fb(bytes.data(), bytes.size());
  if (!r.ok()) return "the written file does not load: " + r.error;
  if (print_graph(r.graph) != print_graph(g)) return "the loaded graph prints differently";
  if (graph_hash(r.graph) != graph_hash(g)) return "the loaded graph hashes differently";
  if (write_graph_fb(r.graph) != bytes) return "writing the loaded graph gives other bytes";
  return "";
}

Graph parse_or_die(const std::string& text) {
  ParseResult p = parse_graph_text(text);
  EXPECT_TRUE(p.ok()) << p.error;
  return p.graph;
}

TEST(FbRoundTrip, EveryFixture) {
  int n = 0;
  for (const char* dir : {DG_FIXTURES_DIR, DG_IR_GOLDEN_DIR, DG_CLI_COMPAT_DIR}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".dgir") continue;
      ParseResult p = parse_graph_text(read_all(e.path()));
      if (!p.ok()) continue;  // golden inputs of rejection tests
      // Its %e12 holds the constant -2^63, which the text form takes and graph.fb does not.
      if (e.path().filename() == "canonical_exprs.dgir")
        EXPECT_EQ(round_trip_problem(p.graph),
                  "refused: write_graph_fb: constant -9223372036854775808 is beyond +-2^62, the "
                  "range graph.fb holds");
      else
        EXPECT_EQ(round_trip_problem(p.graph), "") << e.path();
      ++n;
    }
  }
  EXPECT_GE(n, 10);
}

// The fuzzer's finding: a 0-d `full` has `shape = []`, an empty [long] vector that the builder
// does not align to 8 bytes (Note [Vector element alignment] in ir/fb_loader.cc).
TEST(FbRoundTrip, ZeroDimTensorsAndEmptyLists) {
  Graph g = parse_or_die(
      "graph @empty_lists\n"
      "sym s in [2, inf] div 1\n"
      "input %x: f32[s, 4]\n"
      "%neg_inf: f32[] = full() {dtype = f32, shape = [], value = -inf}\n"
      "%zero: bf16[] = full() {dtype = bf16, shape = sym[], value = -0.0}\n"
      "%same: f32[s, 4] = sum(%x) {dims = []}\n"
      "%scalar: f32[] = sum(%x) {dims = [0, 1]}\n"
      "%m: f32[s, 4] = maximum(%same, %neg_inf)\n"
      "output %m, %scalar, %zero\n");
  EXPECT_EQ(round_trip_problem(g), "");
}

TEST(FbRoundTrip, TheFuzzerInputLoadsAndRoundTrips) {
  std::string bytes =
      read_all(fs::path(DG_FUZZ_CORPUS_DIR) / "roundtrip_misaligned_empty_shape.fb");
  LoadResult r = load_graph_fb(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_NE(print_graph(r.graph).find("shape = []"), std::string::npos);
  EXPECT_EQ(round_trip_problem(r.graph), "");
}

TEST(FbRoundTrip, RandomGraphs) {
  constexpr uint64_t kGraphs = 3000;
  uint64_t nodes = 0;
  for (uint64_t seed = 1; seed <= kGraphs; ++seed) {
    Graph g = testing::random_graph(seed);
    ASSERT_EQ(verify_graph(g, VerifyLimits{}), "") << "seed " << seed << "\n" << print_graph(g);
    nodes += g.nodes.size();
    ASSERT_EQ(round_trip_problem(g), "") << "seed " << seed << "\n" << print_graph(g);
  }
  // The generator must really build graphs, not mostly rejected draws.
  EXPECT_GE(nodes, kGraphs * 3);
}

}  // namespace
}  // namespace dg
