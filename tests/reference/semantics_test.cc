// Cross-cutting semantics: broadcasting, rounding once per op, compute types and promotion,
// empty tensors, and multi-node graphs.
#include <cmath>

#include "ref_test_util.h"

namespace dg::testing {
namespace {

const double kTie = 0x1p-8;  // half a bf16 ulp at 1.0

TEST(ReferenceBroadcast, NumpyRules) {
  GraphBuilder b;
  ValueId x = b.input(DType::kF32, {2, 1, 3});
  ValueId y = b.input(DType::kF32, {4, 1});
  ValueId z = b.input(DType::kF32, {});
  b.output(b.op(OpKind::kMul, {b.op(OpKind::kAdd, {x, y}), z}));
  HostTensor out =
      run1(b.finish(), {T(DType::kF32, {2, 1, 3}, {0, 1, 2, 3, 4, 5}),
                        T(DType::kF32, {4, 1}, {0, 10, 20, 30}), T(DType::kF32, {}, {2})});
  Vals want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(2 * (3 * i + k + 10 * j));
  expect_tensor(out, DType::kF32, {2, 4, 3}, want);
}

TEST(ReferenceBroadcast, SymbolicDimAgainstOne) {
  GraphBuilder b;
  SymExpr s = b.symbol("s");
  ValueId x = b.input(DType::kBF16, {s, 2});
  ValueId bias = b.input(DType::kBF16, {1, 2});
  b.output(b.op(OpKind::kSub, {x, bias}));
  HostTensor out = run1(
      b.finish(), {T(DType::kBF16, {3, 2}, {1, 2, 3, 4, 5, 6}), T(DType::kBF16, {1, 2}, {1, 1})});
  expect_tensor(out, DType::kBF16, {3, 2}, {0, 1, 2, 3, 4, 5});
}

TEST(ReferenceRounding, Bf16AddTiesToEven) {
  GraphBuilder b;
  ValueId x = b.input(DType::kBF16, {3});
  ValueId y = b.input(DType::kBF16, {3});
  b.output(b.op(OpKind::kAdd, {x, y}));
  HostTensor out = run1(b.finish(), {T(DType::kBF16, {3}, {1, 1 + 2 * kTie, 1}),
                                     T(DType::kBF16, {3}, {kTie, kTie, kTie * 1.5})});
  // 1 + 2^-8 is a tie -> 1 (even); 1 + 3 * 2^-8 is a tie -> 1 + 2^-6 (even); above a tie rounds up.
  expect_tensor(out, DType::kBF16, {3}, {1, 1 + 4 * kTie, 1 + 2 * kTie});
}

// Rounding each partial sum to bf16 would lose both halves; the f32 accumulator keeps them.
TEST(ReferenceRounding, LinearAccumulatesInF32AndRoundsOnce) {
  Graph g = [] {
    GraphBuilder b;
    ValueId x = b.input(DType::kBF16, {1, 3});
    ValueId w = b.input(DType::kBF16, {1, 3});
    b.output(b.op(OpKind::kLinear, {x, w}));
    return b.finish();
  }();
  HostTensor out =
      run1(g, {T(DType::kBF16, {1, 3}, {1, kTie, kTie}), T(DType::kBF16, {1, 3}, {1, 1, 1})});
  expect_tensor(out, DType::kBF16, {1, 1}, {1 + 2 * kTie});
}

TEST(ReferenceRounding, MatmulAndSumRoundOnce) {
  GraphBuilder b;
  ValueId x = b.input(DType::kBF16, {1, 3});
  ValueId w = b.input(DType::kBF16, {3, 1});
  b.output(b.op(OpKind::kMatmul, {x, w}));
  b.output(b.op(OpKind::kSum, {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t{0}}}));
  b.output(b.op(OpKind::kMean, {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t{0}}}));
  std::vector<HostTensor> outs = run(
      b.finish(), {T(DType::kBF16, {1, 3}, {1, kTie, kTie}), T(DType::kBF16, {3, 1}, {1, 1, 1})});
  ASSERT_EQ(outs.size(), 3u);
  expect_tensor(outs[0], DType::kBF16, {1, 1}, {1 + 2 * kTie});
  expect_tensor(outs[1], DType::kBF16, {1}, {1 + 2 * kTie});
  expect_tensor(outs[2], DType::kBF16, {1}, {as(DType::kBF16, (1 + 2 * kTie) / 3)});
}

TEST(ReferenceRounding, IndexAddRoundsOncePerElement) {
  GraphBuilder b;
  ValueId x = b.input(DType::kBF16, {1});
  ValueId idx = b.input(DType::kI64, {2});
  ValueId src = b.input(DType::kBF16, {2});
  b.output(b.op(OpKind::kIndexAdd, {x, idx, src}, {{"dim", int64_t{0}}}));
  HostTensor out = run1(b.finish(), {T(DType::kBF16, {1}, {1}), T(DType::kI64, {2}, {0, 0}),
                                     T(DType::kBF16, {2}, {kTie, kTie})});
  expect_tensor(out, DType::kBF16, {1}, {1 + 2 * kTie});
}

// A rank-0 f32 operand of a bf16 op is used at f32 precision (Note [Reference semantics]).
TEST(ReferencePromotion, ScalarOperandKeepsItsPrecision) {
  GraphBuilder b;
  ValueId x = b.input(DType::kBF16, {64});
  ValueId s = b.input(DType::kF32, {});
  b.output(b.op(OpKind::kMul, {x, s}));
  Graph g = b.finish();
  HostTensor xs = random_tensor(DType::kBF16, {64}, 11, -50, 50);
  HostTensor out = run1(g, {xs, T(DType::kF32, {}, {0.1})});
  Vals want;
  int differs = 0;
  const double tenth = as(DType::kF32, 0.1);
  for (int64_t i = 0; i < 64; ++i) {
    want.push_back(as(DType::kBF16, static_cast<float>(xs.get(i)) * static_cast<float>(tenth)));
    differs += want.back() != as(DType::kBF16, xs.get(i) * as(DType::kBF16, 0.1));
  }
  EXPECT_GT(differs, 0) << "inputs do not tell the two rules apart";
  expect_tensor(out, DType::kBF16, {64}, want);
}

TEST(ReferencePromotion, MixedDtypesFollowTheGraph) {
  GraphBuilder b;
  ValueId x = b.input(DType::kBF16, {2});
  ValueId y = b.input(DType::kF32, {2});
  ValueId sum = b.op(OpKind::kAdd, {x, y});  // promotes to f32
  b.output(sum);
  b.output(b.op(OpKind::kLt, {x, y}));
  b.output(b.op(OpKind::kCast, {sum}, {{"dtype", DType::kBF16}}));
  std::vector<HostTensor> outs =
      run(b.finish(), {T(DType::kBF16, {2}, {1, 2}), T(DType::kF32, {2}, {kTie, 2.5})});
  ASSERT_EQ(outs.size(), 3u);
  expect_tensor(outs[0], DType::kF32, {2}, {1 + kTie, 4.5});
  expect_tensor(outs[1], DType::kBool, {2}, {0, 1});
  expect_tensor(outs[2], DType::kBF16, {2}, {1, 4.5});
}

TEST(ReferencePromotion, IntegerArithmeticWraps) {
  GraphBuilder b;
  ValueId x = b.input(DType::kI32, {2});
  b.output(b.op(OpKind::kAdd, {x, x}));
  b.output(b.op(OpKind::kNeg, {x}));
  std::vector<HostTensor> outs =
      run(b.finish(), {T(DType::kI32, {2}, {2147483647, -2147483648.0})});
  ASSERT_EQ(outs.size(), 2u);
  expect_tensor(outs[0], DType::kI32, {2}, {-2, 0});
  expect_tensor(outs[1], DType::kI32, {2}, {-2147483647, -2147483648.0});
}

TEST(ReferenceEmpty, ZeroTokensFlowThrough) {
  GraphBuilder b;
  SymExpr s = b.symbol("s", 0);
  ValueId x = b.input(DType::kBF16, {s, 4});
  ValueId w = b.input(DType::kBF16, {3, 4});
  ValueId y = b.op(OpKind::kSilu, {b.op(OpKind::kLinear, {x, w})});
  b.output(y);
  b.output(b.op(OpKind::kSum, {y}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", int64_t{0}}}));
  b.output(b.op(OpKind::kMean, {y}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", int64_t{0}}}));
  std::vector<HostTensor> outs =
      run(b.finish(), {make_tensor(DType::kBF16, {0, 4}), random_tensor(DType::kBF16, {3, 4}, 1)});
  ASSERT_EQ(outs.size(), 3u);
  expect_tensor(outs[0], DType::kBF16, {0, 3}, {});
  expect_tensor(outs[1], DType::kBF16, {3}, {0, 0, 0});
  expect_tensor(outs[2], DType::kBF16, {3}, {NAN, NAN, NAN});
}

TEST(ReferenceEmpty, AmaxOverEmptyIsAnError) {
  GraphBuilder b;
  SymExpr s = b.symbol("s", 0);
  ValueId x = b.input(DType::kF32, {s, 2});
  b.output(b.op(OpKind::kAmax, {x}, {{"dims", std::vector<int64_t>{0}}}));
  std::string e = run_error(b.finish(), {make_tensor(DType::kF32, {0, 2})});
  EXPECT_NE(e.find("amax"), std::string::npos) << e;
}

// The LoRA expert MLP shape of computation, end to end, against a plain double-precision loop.
TEST(ReferenceGraph, SwiGluMlpMatchesDoubleLoop) {
  const int64_t tokens = 5, hidden = 8, inter = 6;
  GraphBuilder b;
  SymExpr s = b.symbol("s");
  ValueId x = b.input(DType::kF32, {s, hidden});
  ValueId wg = b.input(DType::kF32, {inter, hidden});
  ValueId wu = b.input(DType::kF32, {inter, hidden});
  ValueId wd = b.input(DType::kF32, {hidden, inter});
  ValueId h = b.op(OpKind::kMul, {b.op(OpKind::kSilu, {b.op(OpKind::kLinear, {x, wg})}),
                                  b.op(OpKind::kLinear, {x, wu})});
  b.output(b.op(OpKind::kLinear, {h, wd}));
  std::vector<HostTensor> in = {random_tensor(DType::kF32, {tokens, hidden}, 1),
                                random_tensor(DType::kF32, {inter, hidden}, 2),
                                random_tensor(DType::kF32, {inter, hidden}, 3),
                                random_tensor(DType::kF32, {hidden, inter}, 4)};
  HostTensor out = run1(b.finish(), in);
  Vals want;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> hv(inter);
    for (int64_t j = 0; j < inter; ++j) {
      double g = 0, u = 0;
      for (int64_t k = 0; k < hidden; ++k) {
        g += in[0].get(t * hidden + k) * in[1].get(j * hidden + k);
        u += in[0].get(t * hidden + k) * in[2].get(j * hidden + k);
      }
      hv[j] = g / (1 + std::exp(-g)) * u;
    }
    for (int64_t o = 0; o < hidden; ++o) {
      double acc = 0;
      for (int64_t j = 0; j < inter; ++j) acc += hv[j] * in[3].get(o * inter + j);
      want.push_back(acc);
    }
  }
  expect_tensor(out, DType::kF32, {tokens, hidden}, want, 1e-5, 1e-6);
}

}  // namespace
}  // namespace dg::testing
