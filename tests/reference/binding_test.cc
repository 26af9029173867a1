// Binding symbols from the inputs and rejecting bad inputs, bad indices and malformed graphs:
// every case is an error result with a readable message, never a crash.
#include "ref_test_util.h"

namespace dg::testing {
namespace {

void expect_mentions(const std::string& error, const std::vector<std::string>& words) {
  for (const std::string& w : words) EXPECT_NE(error.find(w), std::string::npos) << error;
}

// x: bf16[s, 4], y: bf16[s, 4] -> add; s >= 2.
Graph two_inputs() {
  GraphBuilder b;
  SymExpr s = b.symbol("s");
  ValueId x = b.input(DType::kBF16, {s, 4});
  ValueId y = b.input(DType::kBF16, {s, 4});
  b.output(b.op(OpKind::kAdd, {x, y}));
  return b.finish();
}

TEST(ReferenceBinding, BindsFromAnyInput) {
  HostTensor out = run1(two_inputs(), {make_tensor(DType::kBF16, {3, 4}, Vals(12, 1)),
                                       make_tensor(DType::kBF16, {3, 4}, Vals(12, 2))});
  expect_tensor(out, DType::kBF16, {3, 4}, Vals(12, 3));
}

TEST(ReferenceBinding, WrongInputCount) {
  expect_mentions(run_error(two_inputs(), {make_tensor(DType::kBF16, {3, 4})}),
                  {"takes 2 inputs, got 1"});
}

TEST(ReferenceBinding, WrongStaticDim) {
  expect_mentions(run_error(two_inputs(),
                            {make_tensor(DType::kBF16, {3, 4}), make_tensor(DType::kBF16, {3, 5})}),
                  {"input 1", "dim 1", "5"});
}

TEST(ReferenceBinding, InconsistentSymbol) {
  expect_mentions(run_error(two_inputs(),
                            {make_tensor(DType::kBF16, {3, 4}), make_tensor(DType::kBF16, {6, 4})}),
                  {"symbol s", "input 1 (%1) dim 0", "input 0 (%0) dim 0"});
}

TEST(ReferenceBinding, WrongDtypeRankOrBytes) {
  expect_mentions(run_error(two_inputs(),
                            {make_tensor(DType::kF32, {3, 4}), make_tensor(DType::kBF16, {3, 4})}),
                  {"input 0", "bf16[s, 4]", "f32[3, 4]"});
  expect_mentions(
      run_error(two_inputs(), {make_tensor(DType::kBF16, {12}), make_tensor(DType::kBF16, {3, 4})}),
      {"input 0"});
  HostTensor short_bytes = make_tensor(DType::kBF16, {3, 4});
  short_bytes.bytes.resize(5);
  expect_mentions(run_error(two_inputs(), {make_tensor(DType::kBF16, {3, 4}), short_bytes}),
                  {"input 1", "bytes"});
  HostTensor negative{DType::kBF16, {-3, 4}, {}};
  run_error(two_inputs(), {negative, make_tensor(DType::kBF16, {3, 4})});
}

TEST(ReferenceBinding, SymbolFacts) {
  GraphBuilder b;
  SymExpr s = b.symbol("s", 2, 100, 8);
  ValueId x = b.input(DType::kF32, {s});
  b.output(b.op(OpKind::kNeg, {x}));
  Graph g = b.finish();
  run1(g, {make_tensor(DType::kF32, {16})});
  expect_mentions(run_error(g, {make_tensor(DType::kF32, {12})}), {"s = 12", "multiple of 8"});
  expect_mentions(run_error(g, {make_tensor(DType::kF32, {104})}), {"s = 104", "range [2, 100]"});
  expect_mentions(run_error(g, {make_tensor(DType::kF32, {0})}), {"s = 0"});
}

TEST(ReferenceBinding, CompoundDimsAreChecked) {
  GraphBuilder b;
  SymExpr s = b.symbol("s");
  ValueId x = b.input(DType::kF32, {s});
  ValueId y = b.input(DType::kF32, {2 * s + 1});
  b.output(b.op(OpKind::kCat, {x, y}, {{"dim", int64_t{0}}}));
  Graph g = b.finish();
  HostTensor out = run1(
      g, {make_tensor(DType::kF32, {2}, {1, 2}), make_tensor(DType::kF32, {5}, {3, 4, 5, 6, 7})});
  expect_tensor(out, DType::kF32, {7}, {1, 2, 3, 4, 5, 6, 7});
  expect_mentions(run_error(g, {make_tensor(DType::kF32, {2}), make_tensor(DType::kF32, {4})}),
                  {"input 1", "is 4", "2*s + 1", "= 5"});
}

TEST(ReferenceBinding, SymbolOnlyInsideAnExpressionIsUnbound) {
  GraphBuilder b;
  SymExpr s = b.symbol("s");
  ValueId x = b.input(DType::kF32, {s + 1});
  b.output(b.op(OpKind::kExp, {x}));
  expect_mentions(run_error(b.finish(), {make_tensor(DType::kF32, {4})}), {"cannot evaluate"});
}

TEST(ReferenceBinding, SymIntInputs) {
  GraphBuilder b;
  SymExpr s = b.symbol("s");
  SymExpr t = b.symbol("t");
  b.sym_input(s);
  b.sym_input(s * t);  // not a bare symbol: checked, not bound
  ValueId x = b.input(DType::kF32, {t});
  b.output(b.op(OpKind::kFull, {},
                {{"value", 1.0}, {"dtype", DType::kI64}, {"shape", std::vector<SymExpr>{s, t}}}));
  b.output(x);
  Graph g = b.finish();
  std::vector<HostTensor> outs =
      run(g, {make_sym_int(3), make_sym_int(6), make_tensor(DType::kF32, {2})});
  ASSERT_EQ(outs.size(), 2u);
  expect_tensor(outs[0], DType::kI64, {3, 2}, Vals(6, 1));
  expect_mentions(run_error(g, {make_sym_int(3), make_sym_int(7), make_tensor(DType::kF32, {2})}),
                  {"input 1", "is 7", "= 6"});
  HostTensor as_i32 = make_tensor(DType::kI32, {}, {3});
  expect_mentions(run_error(g, {as_i32, make_sym_int(6), make_tensor(DType::kF32, {2})}),
                  {"input 0", "rank-0 i64"});
  expect_mentions(run_error(g, {make_tensor(DType::kI64, {1}, {3}), make_sym_int(6),
                                make_tensor(DType::kF32, {2})}),
                  {"rank-0 i64"});
}

TEST(ReferenceBinding, SymIntMustAgreeWithTensorDims) {
  GraphBuilder b;
  SymExpr s = b.symbol("s");
  b.sym_input(s);
  ValueId x = b.input(DType::kF32, {s});
  b.output(b.op(OpKind::kNeg, {x}));
  expect_mentions(run_error(b.finish(), {make_sym_int(3), make_tensor(DType::kF32, {4})}),
                  {"symbol s", "input 1 (%1) dim 0"});
}

TEST(ReferenceBinding, IndexOutOfRangeIsAnError) {
  GraphBuilder b;
  SymExpr s = b.symbol("s");
  ValueId x = b.input(DType::kF32, {4, 2});
  ValueId idx = b.input(DType::kI64, {s});
  ValueId src = b.input(DType::kF32, {s, 2});
  b.output(b.op(OpKind::kIndexSelect, {x, idx}, {{"dim", int64_t{0}}}));
  b.output(b.op(OpKind::kIndexAdd, {x, idx, src}, {{"dim", int64_t{0}}}));
  Graph g = b.finish();
  HostTensor x_in = make_tensor(DType::kF32, {4, 2}), src_in = make_tensor(DType::kF32, {2, 2});
  run(g, {x_in, make_tensor(DType::kI64, {2}, {-4, 3}), src_in});  // -4 wraps to 0
  expect_mentions(run_error(g, {x_in, make_tensor(DType::kI64, {2}, {0, 4}), src_in}),
                  {"index_select", "index 4", "position 1", "size 4"});
  expect_mentions(run_error(g, {x_in, make_tensor(DType::kI64, {2}, {-5, 0}), src_in}),
                  {"index -5"});
}

TEST(ReferenceBinding, MalformedGraphIsAnError) {
  Graph g = two_inputs();
  g.outputs.push_back(99);
  expect_mentions(
      run_error(g, {make_tensor(DType::kBF16, {3, 4}), make_tensor(DType::kBF16, {3, 4})}),
      {"invalid graph"});
  Graph h = two_inputs();
  h.nodes[0].attrs.set("unused", int64_t{1});
  h.nodes[0].op = OpKind::kMatmul;  // declared type no longer matches
  run_error(h, {make_tensor(DType::kBF16, {3, 4}), make_tensor(DType::kBF16, {3, 4})});
  run_error(Graph{}, {});
}

TEST(ReferenceBinding, HugeResultIsAnError) {
  GraphBuilder b;
  SymExpr s = b.symbol("s");
  b.sym_input(s);
  b.output(
      b.op(OpKind::kFull, {},
           {{"value", 0.0}, {"dtype", DType::kF32}, {"shape", std::vector<SymExpr>{s, s, s}}}));
  expect_mentions(run_error(b.finish(), {make_sym_int(1 << 20)}), {"too large"});
}

}  // namespace
}  // namespace dg::testing
