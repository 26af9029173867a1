// The cost model's FLOPs and bytes for a small graph, against figures worked out by hand.
#include "codegen/kernel_cost.h"

#include <gtest/gtest.h>

#include "codegen/emit_cuda.h"

namespace dg {
namespace {

int64_t at(const SymExpr& e, int64_t s) { return e.evaluate({{"s", s}}).value(); }

// x: bf16[s, 64], w: bf16[32, 64], b: f32[s, 32]
//   y = linear(x, w)          bf16[s, 32]
//   yf = cast(y, f32)         f32[s, 32]
//   z = add(yf, b)            f32[s, 32]
//   h = slice(z, 1, 0:16)     f32[s, 16]
//   c = cat(h, yf, h; dim 1)  f32[s, 64]   (output)
Graph small_graph() {
  GraphBuilder b("cost");
  SymExpr s = b.symbol("s", 0);
  ValueId x = b.input(DType::kBF16, {s, 64});
  ValueId w = b.input(DType::kBF16, {32, 64});
  ValueId bias = b.input(DType::kF32, {s, 32});
  ValueId y = b.op(OpKind::kLinear, {x, w});
  ValueId yf = b.op(OpKind::kCast, {y}, {{"dtype", DType::kF32}});
  ValueId z = b.op(OpKind::kAdd, {yf, bias});
  ValueId h = b.op(
      OpKind::kSlice, {z},
      {{"dim", int64_t{1}}, {"start", std::vector<SymExpr>{0}}, {"end", std::vector<SymExpr>{16}}});
  b.output(b.op(OpKind::kCat, {h, yf, h}, {{"dim", int64_t{1}}}));
  return b.finish();
}

TEST(KernelCost, SmallGraphMatchesHandCount) {
  Graph g = small_graph();
  KernelPlan plan = emit_cuda(g);
  // linear (with its tile variants, Note [Tile choice]), cast, add, slice, and cat as one copy of
  // every operand.
  ASSERT_EQ(launch_sites(plan), 5u);
  struct Expected {
    std::vector<int> nodes;
    int64_t flops_per_s, tensor_per_s, bytes_per_s, bytes_const;
  };
  const Expected want[] = {
      // linear: 2*32*64 per row; reads x (128 B/row) and w (4096 B), writes y (64 B/row).
      {{0}, 4096, 4096, 128 + 64, 4096},
      // cast: reads y (64 B/row), writes yf (128 B/row).
      {{1}, 0, 0, 64 + 128, 0},
      // add: 32 per row; reads yf and b, writes z (128 B/row each).
      {{2}, 32, 0, 3 * 128, 0},
      // slice: reads the 16 columns it keeps (64 B/row) of z, writes h (64 B/row).
      {{3}, 0, 0, 64 + 64, 0},
      // cat: reads h (64 B/row, once though it appears twice) and yf (128 B/row), writes all 64
      // columns of c (256 B/row).
      {{4}, 0, 0, 64 + 128 + 256, 0},
  };
  size_t site = 0;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const KernelLaunch& kl = plan.kernels[k];
    // A variant computes what its GEMM's first kernel does: the same costs.
    const Expected& e = want[kl.variant == 0 ? site++ : site - 1];
    EXPECT_EQ(kl.nodes, e.nodes) << kl.name;
    for (int64_t s : {0, 1, 7, 512}) {
      EXPECT_EQ(at(kl.flops, s), e.flops_per_s * s) << kl.name << " s=" << s;
      EXPECT_EQ(at(kl.tensor_flops, s), e.tensor_per_s * s) << kl.name << " s=" << s;
      EXPECT_EQ(at(kl.bytes, s), e.bytes_per_s * s + e.bytes_const) << kl.name << " s=" << s;
    }
  }
}

TEST(KernelCost, OutputCopyHasNoNodesAndCountsBothBuffers) {
  // An output that is also an input is a copy kernel that computes no node.
  GraphBuilder b("copy");
  SymExpr s = b.symbol("s", 0);
  ValueId x = b.input(DType::kBF16, {s, 8});
  b.output(x);
  KernelPlan plan = emit_cuda(b.finish());
  ASSERT_EQ(plan.kernels.size(), 1u);
  EXPECT_TRUE(plan.kernels[0].nodes.empty());
  EXPECT_EQ(at(plan.kernels[0].flops, 5), 0);
  EXPECT_EQ(at(plan.kernels[0].bytes, 5), 2 * 5 * 8 * 2);
}

TEST(KernelCost, NodeFlopsByCategory) {
  GraphBuilder b("flops");
  SymExpr s = b.symbol("s", 0);
  ValueId a = b.input(DType::kF32, {3, s, 10});
  ValueId m = b.input(DType::kF32, {10, 6});
  ValueId p = b.op(OpKind::kMatmul, {a, m});  // f32: not tensor-core
  ValueId r = b.op(OpKind::kSum, {p}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t{0}}});
  ValueId e = b.op(OpKind::kExp, {r});
  b.output(e);
  Graph g = b.finish();
  NodeFlops mm = node_flops(g, g.nodes[0]), sum = node_flops(g, g.nodes[1]),
            ex = node_flops(g, g.nodes[2]);
  EXPECT_EQ(mm.flops.evaluate({{"s", 4}}).value(), 2 * 3 * 4 * 6 * 10);
  EXPECT_EQ(mm.tensor_flops.evaluate({{"s", 4}}).value(), 0);
  EXPECT_EQ(sum.flops.evaluate({{"s", 4}}).value(), 3 * 4 * 6);
  EXPECT_EQ(ex.flops.evaluate({{"s", 4}}).value(), 3 * 6);
}

}  // namespace
}  // namespace dg
