// Note [Out-of-range indices]: an index outside the indexed dim (after one wrap of a negative
// one) makes a float result NaN instead of silently wrong, for reads (gather, index_select) and
// for scatters (index_add, index_copy, scatter); in-range calls of the same executable are exact.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/graph.h"
#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "runtime/reference/host_tensor.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

TEST(IndexPoison, BadIndicesGiveNaNNotWrongValues) {
  GraphBuilder b("poison");
  SymExpr n = b.symbol("n", 1);
  ValueId x = b.input(DType::kF32, {4, 2});
  ValueId idx = b.input(DType::kI64, {n});
  ValueId src = b.input(DType::kF32, {n, 2});
  b.output(b.op(OpKind::kIndexSelect, {x, idx}, {{"dim", int64_t{0}}}));
  b.output(b.op(OpKind::kIndexAdd, {x, idx, src}, {{"dim", int64_t{0}}}));
  b.output(b.op(OpKind::kIndexCopy, {x, idx, src}, {{"dim", int64_t{0}}}));
  ValueId col = b.op(OpKind::kReshape, {idx}, {{"shape", std::vector<SymExpr>{n, 1}}});
  ValueId rows = b.input(DType::kF32, {n, 3});
  b.output(b.op(OpKind::kGather, {rows, col}, {{"dim", int64_t{1}}}));
  Graph g = b.finish();
  auto exe = testing::compile_for_host(g);
  ASSERT_TRUE(exe);
  HostTensor xt = make_tensor(DType::kF32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  HostTensor st = make_tensor(DType::kF32, {2, 2}, {10, 20, 30, 40});
  HostTensor rt = make_tensor(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});

  // In range (with a wrapped -1): exact values.
  auto ok = run_on_host(*exe, {xt, make_tensor(DType::kI64, {2}, {2, -1}), st, rt});
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(ok.value()[0].get(0), 4);   // x[2][0]
  EXPECT_EQ(ok.value()[0].get(3), 7);   // x[3][1]
  EXPECT_EQ(ok.value()[1].get(4), 14);  // x[2][0] + 10
  EXPECT_EQ(ok.value()[2].get(7), 40);  // x[3][1] replaced
  EXPECT_EQ(ok.value()[3].get(0), 3);   // rows[0][2]

  // 7 is out of range for every indexed dim (4 rows, 3 columns): every result shows NaN.
  auto bad = run_on_host(*exe, {xt, make_tensor(DType::kI64, {2}, {1, 7}), st, rt});
  ASSERT_TRUE(bad.ok()) << bad.message();
  const std::vector<HostTensor>& out = bad.value();
  EXPECT_EQ(out[0].get(0), 2);             // the good row is read
  EXPECT_TRUE(std::isnan(out[0].get(2)));  // the bad one is NaN, not 0 or garbage
  EXPECT_EQ(out[1].get(2), 12);            // x[1][0] + 10: the good contribution
  EXPECT_TRUE(std::isnan(out[1].get(0)) && std::isnan(out[1].get(1)));  // poison in row 0
  EXPECT_EQ(out[2].get(2), 10);
  EXPECT_TRUE(std::isnan(out[2].get(0)));
  EXPECT_EQ(out[3].get(0), 2);
  EXPECT_TRUE(std::isnan(out[3].get(1)));
}

}  // namespace
}  // namespace dg
