// Every op of the catalog: its generated source compiles with NVRTC for sm_80 and sm_90a, and its
// kernels, run under host emulation for several extents, match the reference evaluator.
#include "codegen/emit_cuda.h"

#include <gtest/gtest.h>

#include <set>

#include "ir/verifier.h"
#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "runtime/reference/reference_eval.h"
#include "tests/codegen/op_cases.h"
#include "tests/common/temp_dir.h"

namespace dg {
namespace {

// ctest runs each case in its own process: they share the test run's cache folder (the binary
// of a case is compiled once per folder; these tests check numerics, not cache behaviour).
std::string cache_dir() { return testing::run_cache_dir("dyngen-codegen-test-cache"); }

TEST(CodegenCatalog, EveryOpHasACase) {
  std::set<OpKind> covered;
  for (const OpCase& c : all_op_cases()) {
    EXPECT_EQ(verify_graph(c.graph), "") << c.name;
    for (const Node& n : c.graph.nodes) covered.insert(n.op);
  }
  int count = 0;
  const OpInfo* ops = all_ops(&count);
  for (int i = 0; i < count; ++i) EXPECT_TRUE(covered.count(ops[i].kind)) << ops[i].name;
}

class CodegenOp : public ::testing::TestWithParam<OpCase> {};

TEST_P(CodegenOp, CompilesWithNvrtcForAmpereAndHopper) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CompileRequest req;
    req.target = arch;
    req.cache_dir = cache_dir();
    CompileOutcome o = compile_graph(GetParam().graph, req);
    EXPECT_TRUE(o.ok()) << arch << ": " << o.error;
  }
}

TEST_P(CodegenOp, MatchesReferenceUnderHostEmulation) {
  CompileRequest req;
  req.target = "host";
  req.cache_dir = cache_dir();
  CompileOutcome o = compile_graph(GetParam().graph, req);
  ASSERT_TRUE(o.ok()) << o.error;
  for (int64_t n : {0, 1, 5, 64, 131}) {
    auto inputs = make_random_inputs(GetParam().graph, {{"n", n}}, 17 + n);
    ASSERT_TRUE(inputs.ok()) << inputs.message();
    if (!reference_eval(GetParam().graph, inputs.value()).ok()) {
      // What PyTorch rejects (e.g. amax over zero elements) dyngen rejects too, never a value.
      EXPECT_FALSE(run_on_host(*o.executable, inputs.value()).ok()) << "n=" << n;
      continue;
    }
    auto checks = check_against_reference(GetParam().graph, *o.executable, inputs.value());
    ASSERT_TRUE(checks.ok()) << "n=" << n << ": " << checks.message();
    for (const OutputCheck& c : checks.value())
      EXPECT_TRUE(c.ok) << "n=" << n << " " << c.what << ": " << c.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Catalog, CodegenOp, ::testing::ValuesIn(all_op_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dg
