#include "tests/common/token_sweep.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/common/fixtures.h"
#include "tests/common/temp_dir.h"

namespace dg::testing {

std::shared_ptr<Executable> compile_for_host(const Graph& g) {
  CompileRequest req;
  req.target = "host";
  req.cache_dir = run_cache_dir("dyngen-codegen-test-cache");
  CompileOutcome o = compile_graph(g, req);
  EXPECT_TRUE(o.ok()) << o.error;
  return o.executable;
}

CompiledGraph compile_text(const std::string& text, const CompileRequest& req) {
  Graph g = parse_or_fail(text);
  CompileOutcome o = compile_graph(g, req);
  EXPECT_TRUE(o.ok()) << o.error;
  return {std::move(g), o.executable};
}

void expect_within_scale(const std::vector<HostTensor>& actual,
                         const std::vector<HostTensor>& expected, double fraction,
                         const std::string& where) {
  ASSERT_EQ(actual.size(), expected.size()) << where;
  for (size_t o = 0; o < expected.size(); ++o) {
    double scale = 1;
    for (int64_t i = 0; i < expected[o].numel(); ++i)
      scale = std::max(scale, std::fabs(expected[o].get(i)));
    const CompareResult r = compare(actual[o], expected[o], fraction, fraction * scale);
    EXPECT_TRUE(r.ok) << where << " output " << o << ": " << r.message;
  }
}

void expect_matches_reference_at(const Graph& g, const Executable& exe, const std::string& symbol,
                                 int64_t value, uint64_t seed, ToleranceMode mode,
                                 const HostRunOptions& where) {
  const std::string at = symbol + "=" + std::to_string(value);
  auto inputs = make_random_inputs(g, {{symbol, value}}, seed);
  ASSERT_TRUE(inputs.ok()) << at << ": " << inputs.message();
  auto checks = check_against_reference(g, exe, inputs.value(), 1.0, where, mode);
  ASSERT_TRUE(checks.ok()) << at << ": " << checks.message();
  for (const OutputCheck& c : checks.value())
    EXPECT_TRUE(c.ok) << at << " " << c.what << ": " << c.message;
}

void check_every_token_count(const Graph& g, const std::string& symbol,
                             const std::vector<int64_t>& token_counts, const std::string& cache_dir,
                             SweepCompiles compiles) {
  CompileRequest req;
  req.target = "host";
  req.cache_dir = cache_dir;
  int64_t compiles_before = runtime_stats().nvrtc_compiles;
  CompileOutcome o = compile_graph(g, req);
  ASSERT_TRUE(o.ok()) << o.error;
  for (int64_t s : token_counts) {
    expect_matches_reference_at(g, *o.executable, symbol, s, 100 + s, ToleranceMode::kTensorScale);
    if (::testing::Test::HasFatalFailure()) return;
  }
  const int64_t made = runtime_stats().nvrtc_compiles - compiles_before;
  if (compiles == SweepCompiles::kExactlyOne)
    EXPECT_EQ(made, 1) << "one compile for every s";
  else
    EXPECT_LE(made, 1) << "one compile for every s";
}

}  // namespace dg::testing
