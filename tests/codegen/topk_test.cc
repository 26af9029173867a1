// topk's kernel (Note [Top-k op] in ir/shape_infer.cc) under the host emulation against a stable
// descending sort written here: rows full of ties, NaN, -inf, +inf and signed zeros, k = 1, k = the
// row's length, a row length only known at run time, one row and row counts around the 128-thread
// block; the same bits under the adversarial schedules. And cat as one launch for all operands,
// an empty one included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "ir/graph.h"
#include "runtime/host_run.h"
#include "tests/codegen/grouped_cases.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

constexpr int64_t kKs[] = {1, 5, 16};

// x: f32[r, c] with c a symbol of at least 16, so every k of kKs fits every binding.
Graph topk_graph() {
  GraphBuilder b("topk");
  SymExpr r = b.symbol("r", 1), c = b.symbol("c", 16);
  ValueId x = b.input(DType::kF32, {r, c});
  for (int64_t k : kKs) b.output(b.op(OpKind::kTopk, {x}, {{"k", k}}));
  return b.finish();
}

// Values drawn from a few, so most rows hold ties, NaNs and infinities.
HostTensor tie_heavy_rows(int64_t rows, int64_t len, uint32_t seed) {
  const double pool[] = {NAN, -INFINITY, INFINITY, -1.0, -0.0, 0.0, 2.0, 2.5};
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<size_t>(rows * len));
  for (double& e : v) e = pool[rng() % 8];
  return make_tensor(DType::kF32, {rows, len}, v);
}

// The first k positions of a stable sort of the row: NaN first, then larger values.
std::vector<int64_t> expected_row(const HostTensor& x, int64_t row, int64_t len, int64_t k) {
  std::vector<int64_t> order(static_cast<size_t>(len));
  std::iota(order.begin(), order.end(), int64_t{0});
  auto at = [&](int64_t j) { return x.get(row * len + j); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
    const bool ni = std::isnan(at(i)), nj = std::isnan(at(j));
    return ni ? !nj : (!nj && at(i) > at(j));
  });
  order.resize(static_cast<size_t>(k));
  return order;
}

TEST(TopkKernel, StableDescendingOrderForEveryRowCountAndLength) {
  const Graph g = topk_graph();
  auto exe = testing::compile_for_host(g);
  ASSERT_TRUE(exe);
  for (int64_t rows : {1, 127, 128, 129, 300}) {
    for (int64_t len : {16, 17, 64}) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " len=" + std::to_string(len));
      const HostTensor x = tie_heavy_rows(rows, len, static_cast<uint32_t>(rows * 100 + len));
      auto out = run_on_host(*exe, {x});
      ASSERT_TRUE(out.ok()) << out.message();
      for (size_t o = 0; o < std::size(kKs); ++o) {
        const int64_t k = kKs[o];
        const HostTensor& idx = out.value()[o];
        ASSERT_EQ(idx.shape, (std::vector<int64_t>{rows, k}));
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<int64_t> want = expected_row(x, r, len, k);
          for (int64_t s = 0; s < k; ++s)
            ASSERT_EQ(idx.get_int(r * k + s), want[static_cast<size_t>(s)])
                << "k=" << k << " row " << r << " place " << s;
        }
      }
    }
  }
}

TEST(TopkKernel, HandPickedRows) {
  const Graph g = topk_graph();
  auto exe = testing::compile_for_host(g);
  ASSERT_TRUE(exe);
  // 16 elements: two NaNs, a run of equal 3s, -0 and +0, -inf at the end; k = 16 is the row.
  std::vector<double> row = {3, -INFINITY, NAN, 3,  -0.0, 0.0, 7, 3,
                             1, NAN,       3,   -2, 7,    0.0, 1, -INFINITY};
  auto out = run_on_host(*exe, {make_tensor(DType::kF32, {1, 16}, row)});
  ASSERT_TRUE(out.ok()) << out.message();
  const std::vector<int64_t> want = {2, 9, 6, 12, 0, 3, 7, 10, 8, 14, 4, 5, 13, 11, 1, 15};
  EXPECT_EQ(out.value()[0].get_int(0), 2);
  for (int64_t s = 0; s < 5; ++s) EXPECT_EQ(out.value()[1].get_int(s), want[s]) << s;
  for (int64_t s = 0; s < 16; ++s) EXPECT_EQ(out.value()[2].get_int(s), want[s]) << s;
}

TEST(TopkKernel, SameBitsUnderAdversarialSchedules) {
  const Graph g = topk_graph();
  auto exe = testing::compile_for_host(g);
  ASSERT_TRUE(exe);
  expect_same_bits_under_adversarial_emulation(*exe, {tie_heavy_rows(261, 40, 7)});
}

TEST(CatKernel, OneLaunchForEveryOperandAnEmptyOneIncluded) {
  GraphBuilder b("cat");
  SymExpr n = b.symbol("n", 1), m = b.symbol("m", 0);
  ValueId x = b.input(DType::kBF16, {n, 3});
  ValueId y = b.input(DType::kBF16, {n, m});
  ValueId z = b.input(DType::kBF16, {n, 1});
  b.output(b.op(OpKind::kCat, {x, y, z, x, y}, {{"dim", int64_t{1}}}));
  b.output(b.op(OpKind::kCat, {y, x}, {{"dim", int64_t{-1}}}));
  const Graph g = b.finish();
  auto exe = testing::compile_for_host(g);
  ASSERT_TRUE(exe);
  EXPECT_EQ(exe->plan().kernels.size(), 2u);  // one per cat, not one per operand
  for (int64_t mm : {0, 1, 6}) {
    auto inputs = make_random_inputs(g, {{"n", 131}, {"m", mm}}, 5 + mm);
    ASSERT_TRUE(inputs.ok()) << inputs.message();
    auto checks = check_against_reference(g, *exe, inputs.value());
    ASSERT_TRUE(checks.ok()) << checks.message();
    for (const OutputCheck& c : checks.value())
      EXPECT_TRUE(c.ok) << "m=" << mm << ": " << c.message;
  }
}

}  // namespace
}  // namespace dg
