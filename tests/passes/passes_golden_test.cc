// Golden tests: IR in, one pass (or the whole pipeline), expected IR out. Each golden file holds
// the input graph, a line "# PASS: <name>" and, after "# EXPECT:", the printed result.
// Regenerate an expectation with DYNGEN_UPDATE_GOLDEN=1 (then review the diff).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "ir/fusion.h"
#include "ir/text_format.h"
#include "passes/passes.h"
#include "passes/pipeline.h"
#include "tests/common/file_bytes.h"
#include "tests/common/fixtures.h"

namespace dg {
namespace {

namespace fs = std::filesystem;

using testing::fixture_path;
using testing::read_all;

Graph apply_pass(const std::string& pass, const Graph& g) {
  if (pass == "cse") return eliminate_common_subexpressions(g);
  if (pass == "fold_casts") return fold_casts(g);
  if (pass == "dce") return eliminate_dead_code(g);
  if (pass == "pipeline") return run_pipeline(g);
  return run_pass(pass, g);
}

std::vector<fs::path> golden_files() {
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(DG_PASSES_GOLDEN_DIR))
    if (e.path().extension() == ".dgir") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(PassesGolden, EachFileMatchesItsExpectation) {
  auto files = golden_files();
  ASSERT_FALSE(files.empty());
  for (const fs::path& file : files) {
    std::string text = read_all(file);
    size_t pass_at = text.find("# PASS: ");
    size_t expect_at = text.find("# EXPECT:\n");
    ASSERT_NE(pass_at, std::string::npos) << file;
    std::string pass = text.substr(pass_at + 8, text.find('\n', pass_at) - pass_at - 8);
    std::string input = text.substr(0, expect_at == std::string::npos ? text.size() : expect_at);
    ParseResult parsed = parse_graph_text(input);
    ASSERT_TRUE(parsed.ok()) << file << ": " << parsed.error;
    std::string got = print_graph(apply_pass(pass, parsed.graph));
    if (std::getenv("DYNGEN_UPDATE_GOLDEN")) {
      std::string expected_block;
      std::istringstream lines(got);
      for (std::string line; std::getline(lines, line);) expected_block += "#| " + line + "\n";
      std::ofstream(file) << input << "# EXPECT:\n" << expected_block;
      continue;
    }
    ASSERT_NE(expect_at, std::string::npos) << file << " has no # EXPECT: section";
    std::string expected;
    std::istringstream lines(text.substr(expect_at + 10));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("#| ", 0) == 0) expected += line.substr(3) + "\n";
    EXPECT_EQ(got, expected) << file;
    // A pass is idempotent: running it on its own output changes nothing.
    EXPECT_EQ(print_graph(apply_pass(pass, parse_graph_text(got).graph)), got) << file;
  }
}

TEST(PassesGolden, PipelineKeepsTheSeedGraphValidAndRemovesItsRedundantCasts) {
  ParseResult seed = parse_graph_text(read_all(fixture_path("seed_expert_mlp.dgir")));
  ASSERT_TRUE(seed.ok()) << seed.error;
  std::vector<std::string> ran;
  PipelineOptions opts;
  opts.after_pass = [&](const std::string& name, const Graph&) { ran.push_back(name); };
  Graph out = run_pipeline(seed.graph, opts);
  EXPECT_EQ(ran, (std::vector<std::string>{
                     "input", "cse", "fold_casts", "fold_permutes", "dce", "split_weight_grads",
                     "hoist_gemm_scale", "concat_gemm_k", "fuse_lora_linear", "fuse_gate_up",
                     "fuse_operand_views", "fuse_pointwise", "fuse_concat_operands",
                     "fuse_epilogue_producers", "group_independent_gemms"}));
  auto count = [](const Graph& g, OpKind op) {
    int n = 0;
    for (const Node& node : g.nodes) n += node.op == op;
    return n;
  };
  // PEFT casts x to f32 once for gate and once for up: cse merges them.
  EXPECT_EQ(count(out, OpKind::kCast), count(seed.graph, OpKind::kCast) - 1);
  // The three scaling constants are one after cse.
  EXPECT_EQ(count(out, OpKind::kConstant), 1);
}

// Note [Weight-gradient groups]: the six LoRA weight gradients of the seed's backward (K = s77)
// become one group, and their scaled-gradient prologues move into it.
TEST(PassesGolden, SeedBackwardWeightGradientsFormOneGroup) {
  for (const char* fixture :
       {"seed_expert_mlp_backward.dgir", "seed_expert_mlp_backward_aot.dgir"}) {
    ParseResult parsed = parse_graph_text(read_all(fixture_path(fixture)));
    ASSERT_TRUE(parsed.ok()) << parsed.error;
    Graph out = run_pipeline(parsed.graph);
    std::set<int64_t> groups;
    int grads = 0;
    for (const Node& n : out.nodes) {
      if (!n.attrs.has("split_tokens")) continue;
      groups.insert(*n.attrs.get_int("fusion"));
      grads += n.op == OpKind::kMatmul;
    }
    EXPECT_EQ(grads, 6) << fixture;
    EXPECT_EQ(groups.size(), 1u) << fixture;
  }
}

// Note [Grouped GEMMs]: the seed backward's two rank-r products of the gate and up gradients share
// one group (two problems); without group_independent_gemms they keep a group each.
TEST(PassesGolden, SeedBackwardRankRProductsShareOneGroupUnlessDisabled) {
  ParseResult parsed = parse_graph_text(read_all(fixture_path("seed_expert_mlp_backward.dgir")));
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  for (bool disabled : {false, true}) {
    PipelineOptions opts;
    if (disabled) opts.disabled = {"group_independent_gemms"};
    Graph out = run_pipeline(parsed.graph, opts);
    std::set<int64_t> gemm_groups, grouped;
    for (const Node& n : out.nodes) {
      bool anchor = op_info(n.op).category == OpCategory::kMatmul && !is_epilogue_matmul(n) &&
                    !is_wgrad_member(n);
      if (anchor) gemm_groups.insert(fusion_group(n));
      if (gemm_problem(n) >= 0) grouped.insert(fusion_group(n));
    }
    SCOPED_TRACE(disabled ? "disabled" : "enabled");
    EXPECT_EQ(gemm_groups.size(), disabled ? 5u : 4u);
    EXPECT_EQ(grouped.size(), disabled ? 0u : 1u);
  }
}

TEST(PassesGolden, DisabledPassIsSkipped) {
  ParseResult seed = parse_graph_text(read_all(fixture_path("seed_expert_mlp.dgir")));
  PipelineOptions opts;
  opts.disabled = {"cse"};
  Graph out = run_pipeline(seed.graph, opts);
  EXPECT_EQ(out.nodes.size(), seed.graph.nodes.size());
}

}  // namespace
}  // namespace dg
