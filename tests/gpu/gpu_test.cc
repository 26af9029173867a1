// On a real GPU: every codegen catalog case and the seed's forward and backward, compiled for
// the device's arch, run through CudaModule and compared with the reference evaluator.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ir/text_format.h"
#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "runtime/reference/reference_eval.h"
#include "tests/codegen/op_cases.h"
#include "tests/gpu/device_run.h"

namespace dg {
namespace {

// GTEST_SKIP only leaves the function it is in, so each test says it itself.
#define DG_SKIP_WITHOUT_GPU()                                        \
  do {                                                               \
    std::string why;                                                 \
    if (!gpu_usable(&why)) GTEST_SKIP() << "no usable GPU: " << why; \
  } while (0)

void expect_matches(const Graph& g, const Executable& exe, const std::string& symbol, int64_t n) {
  auto inputs = make_random_inputs(g, {{symbol, n}}, 91 + n);
  ASSERT_TRUE(inputs.ok()) << inputs.message();
  RefResult want = reference_eval(g, inputs.value());
  auto got = run_on_device(exe, inputs.value());
  if (!want.ok()) {
    EXPECT_FALSE(got.ok()) << n << ": the reference refuses (" << want.error << ")";
    return;
  }
  ASSERT_TRUE(got.ok()) << symbol << "=" << n << ": " << got.message();
  for (size_t j = 0; j < want.outputs.size(); ++j) {
    CompareResult c =
        compare(got.value()[j], want.outputs[j], default_tolerance(want.outputs[j].dtype));
    EXPECT_TRUE(c.ok) << symbol << "=" << n << " output " << j << ": " << c.message;
  }
}

class GpuOp : public ::testing::TestWithParam<OpCase> {};

TEST_P(GpuOp, MatchesReferenceOnTheGpu) {
  DG_SKIP_WITHOUT_GPU();
  CompileRequest req;
  req.target = "cuda";
  CompileOutcome o = compile_graph(GetParam().graph, req);
  ASSERT_TRUE(o.ok()) << o.error;
  ASSERT_TRUE(o.executable->on_gpu());
  for (int64_t n : {0, 1, 5, 64, 131}) expect_matches(GetParam().graph, *o.executable, "n", n);
}

INSTANTIATE_TEST_SUITE_P(Catalog, GpuOp, ::testing::ValuesIn(all_op_cases()),
                         [](const auto& info) { return info.param.name; });

Graph load_fixture(const std::string& name) {
  std::ifstream f(std::string(DG_FIXTURES_DIR) + "/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  ParseResult r = parse_graph_text(ss.str());
  EXPECT_TRUE(r.ok()) << r.error;
  return r.graph;
}

void check_seed(const std::string& fixture) {
  Graph g = load_fixture(fixture);
  CompileRequest req;
  req.target = "cuda";
  CompileOutcome o = compile_graph(g, req);
  ASSERT_TRUE(o.ok()) << o.error;
  for (int64_t n : {2, 3, 17, 64, 65, 500, 4099}) expect_matches(g, *o.executable, "s77", n);
}

TEST(GpuSeed, ForwardMatchesReference) {
  DG_SKIP_WITHOUT_GPU();
  check_seed("seed_expert_mlp.dgir");
}

TEST(GpuSeed, BackwardMatchesReference) {
  DG_SKIP_WITHOUT_GPU();
  check_seed("seed_expert_mlp_backward.dgir");
}

}  // namespace
}  // namespace dg
