// expert_offsets and expert_order (Note [Grouped experts ops]) under the host emulation: equal
// to the reference, the order stable (sorted by expert, ties by ascending flat index) across
// several chunks of the counting sort, the same bits under adversarial schedules, and a bad
// expert index reported as the launch's error (Note [Bad expert indices]) for i64 and i32.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "ir/graph.h"
#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

Graph route_graph(DType index_dtype, int64_t experts, int64_t top_k) {
  GraphBuilder b("route");
  SymExpr t = b.symbol("t", 0);
  ValueId idx = b.input(index_dtype, {t, top_k});
  b.output(b.op(OpKind::kExpertOffsets, {idx}, {{"num_experts", experts}}));
  b.output(b.op(OpKind::kExpertOrder, {idx}, {{"num_experts", experts}}));
  return b.finish();
}

// The order is a permutation, sorted by expert, ties by ascending flat index; offs[e] counts the
// entries of experts <= e.
void expect_stable_order(const HostTensor& idx, const HostTensor& offs, const HostTensor& order) {
  const int64_t n = idx.numel();
  ASSERT_EQ(order.numel(), n);
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t p = 0; p < n; ++p) {
    const int64_t i = order.get_int(p);
    ASSERT_TRUE(i >= 0 && i < n && !seen[static_cast<size_t>(i)]) << "position " << p;
    seen[static_cast<size_t>(i)] = true;
    if (p == 0) continue;
    const int64_t prev = order.get_int(p - 1);
    const bool sorted =
        idx.get_int(prev) < idx.get_int(i) || (idx.get_int(prev) == idx.get_int(i) && prev < i);
    EXPECT_TRUE(sorted) << "position " << p;
  }
  for (int64_t e = 0; e < offs.numel(); ++e) {
    int64_t count = 0;
    for (int64_t p = 0; p < n; ++p) count += idx.get_int(p) <= e;
    EXPECT_EQ(offs.get_int(e), count) << "expert " << e;
  }
}

struct RouteCase {
  DType dtype;
  int64_t experts, top_k;
};

void PrintTo(const RouteCase& c, std::ostream* os) {
  *os << dtype_name(c.dtype) << " " << c.experts << "x" << c.top_k;
}

class MoeRoute : public ::testing::TestWithParam<RouteCase> {};

TEST_P(MoeRoute, StableOrderAndOffsetsOverSeveralChunks) {
  const RouteCase& c = GetParam();
  const Graph g = route_graph(c.dtype, c.experts, c.top_k);
  auto exe = testing::compile_for_host(g);
  ASSERT_TRUE(exe);
  // 0 and 1 tokens, and token counts whose entries span one, two and three 2048-entry chunks.
  for (int64_t t : {int64_t{0}, int64_t{1}, int64_t{7}, 2048 / c.top_k + 3, 5000 / c.top_k}) {
    SCOPED_TRACE("t=" + std::to_string(t));
    auto inputs = make_random_inputs(g, {{"t", t}}, 11 + t);
    ASSERT_TRUE(inputs.ok()) << inputs.message();
    auto checks = check_against_reference(g, *exe, inputs.value());
    ASSERT_TRUE(checks.ok()) << checks.message();
    for (const OutputCheck& check : checks.value()) EXPECT_TRUE(check.ok) << check.message;
    auto out = run_on_host(*exe, inputs.value());
    ASSERT_TRUE(out.ok()) << out.message();
    expect_stable_order(inputs.value()[0], out.value()[0], out.value()[1]);
  }
}

TEST_P(MoeRoute, SameBitsUnderAdversarialSchedules) {
  const RouteCase& c = GetParam();
  const Graph g = route_graph(c.dtype, c.experts, c.top_k);
  auto exe = testing::compile_for_host(g);
  ASSERT_TRUE(exe);
  auto inputs = make_random_inputs(g, {{"t", 4100 / c.top_k}}, 3);
  ASSERT_TRUE(inputs.ok());
  auto plain = run_on_host(*exe, inputs.value());
  ASSERT_TRUE(plain.ok()) << plain.message();
  const char* modes[][2] = {
      {"DYNGEN_EMU_THREADS", "4"}, {"DYNGEN_EMU_SCHED", "random"}, {"DYNGEN_EMU_SEED", "5"}};
  std::map<std::string, std::string> saved;
  for (const auto& [name, value] : modes) {
    if (const char* old = std::getenv(name)) saved[name] = old;
    setenv(name, value, 1);
  }
  auto shuffled = run_on_host(*exe, inputs.value());
  for (const auto& [name, value] : modes) {
    auto it = saved.find(name);
    if (it == saved.end())
      unsetenv(name);
    else
      setenv(name, it->second.c_str(), 1);
  }
  ASSERT_TRUE(shuffled.ok()) << shuffled.message();
  for (size_t o = 0; o < plain.value().size(); ++o)
    EXPECT_EQ(plain.value()[o].bytes, shuffled.value()[o].bytes) << "output " << o;
}

TEST_P(MoeRoute, ABadExpertIndexIsTheLaunchsError) {
  const RouteCase& c = GetParam();
  const Graph g = route_graph(c.dtype, c.experts, c.top_k);
  auto exe = testing::compile_for_host(g);
  ASSERT_TRUE(exe);
  for (int64_t bad : {c.experts, int64_t{-1}, int64_t{1} << 40}) {
    if (c.dtype == DType::kI32 && bad > (int64_t{1} << 30)) continue;
    auto inputs = make_random_inputs(g, {{"t", 300}}, 9);
    ASSERT_TRUE(inputs.ok());
    const int64_t at = inputs.value()[0].numel() * 2 / 3;  // in the last chunk for 64 x 8
    inputs.value()[0].set_int(at, bad);
    auto out = run_on_host(*exe, inputs.value());
    ASSERT_FALSE(out.ok()) << "bad index " << bad << " accepted";
    EXPECT_NE(out.message().find("expert index " + std::to_string(bad) + " at position " +
                                 std::to_string(at) + " is out of range for " +
                                 std::to_string(c.experts) + " experts"),
              std::string::npos)
        << out.message();
  }
}

INSTANTIATE_TEST_SUITE_P(Routings, MoeRoute,
                         ::testing::Values(RouteCase{DType::kI64, 64, 8},
                                           RouteCase{DType::kI32, 16, 2},
                                           RouteCase{DType::kI64, 16, 4}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.dtype)) + "_" +
                                  std::to_string(info.param.experts) + "x" +
                                  std::to_string(info.param.top_k);
                         });

}  // namespace
}  // namespace dg
