// Cases for the ops added for ThunderFX coverage: cumsum, index_copy, gather, scatter,
// sym_constant, and sinc at 0 (its removable singularity); and the MoE router's topk.
#include "op_case.h"

namespace dg::testing {

void add_thunder_coverage_cases(std::vector<OpCase>& cases) {
  cases.push_back(
      {OpKind::kCumsum, "rows_and_cols", [] {
         Graph g = one_op(OpKind::kCumsum, {{DType::kF32, {2, 3}}}, {{"dim", int64_t{1}}});
         expect_tensor(run1(g, {T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6})}), DType::kF32, {2, 3},
                       {1, 3, 6, 4, 9, 15});
         Graph h = one_op(OpKind::kCumsum, {{DType::kF32, {2, 3}}}, {{"dim", int64_t{-2}}});
         expect_tensor(run1(h, {T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6})}), DType::kF32, {2, 3},
                       {1, 2, 3, 5, 7, 9});
       }});
  cases.push_back(
      {OpKind::kCumsum, "bool_counts_in_i64", [] {
         Graph g = one_op(OpKind::kCumsum, {{DType::kBool, {5}}}, {{"dim", int64_t{0}}});
         expect_tensor(run1(g, {T(DType::kBool, {5}, {1, 0, 1, 1, 0})}), DType::kI64, {5},
                       {1, 1, 2, 3, 3});
       }});
  cases.push_back(
      {OpKind::kCumsum, "bf16_rounds_each_prefix", [] {
         // 256 + 1 rounds back to 256 in bf16, but the running sum keeps the 1s.
         Graph g = one_op(OpKind::kCumsum, {{DType::kBF16, {3}}}, {{"dim", int64_t{0}}});
         expect_tensor(run1(g, {T(DType::kBF16, {3}, {256, 1, 1})}), DType::kBF16, {3},
                       {256, 256, 258});
       }});
  cases.push_back(
      {OpKind::kIndexCopy, "wraps_and_rejects", [] {
         Graph g = one_op(OpKind::kIndexCopy,
                          {{DType::kF32, {4, 2}}, {DType::kI64, {2}}, {DType::kF32, {2, 2}}},
                          {{"dim", int64_t{0}}});
         HostTensor out =
             run1(g, {T(DType::kF32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}),
                      T(DType::kI64, {2}, {3, -4}), T(DType::kF32, {2, 2}, {-1, -2, -3, -4})});
         expect_tensor(out, DType::kF32, {4, 2}, {-3, -4, 2, 3, 4, 5, -1, -2});
         std::string e =
             run_error(g, {T(DType::kF32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}),
                           T(DType::kI64, {2}, {4, 0}), T(DType::kF32, {2, 2}, {-1, -2, -3, -4})});
         EXPECT_NE(e.find("out of range"), std::string::npos) << e;
       }});
  cases.push_back(
      {OpKind::kTopk, "nan_first_then_ties_by_position", [] {
         // Note [Top-k op]: the NaNs by position, then descending, -0 and +0 tied, -inf last.
         const double nan = std::nan(""), inf = INFINITY;
         Graph g = one_op(OpKind::kTopk, {{DType::kF32, {2, 9}}}, {{"k", int64_t{9}}});
         HostTensor x = T(DType::kF32, {2, 9},
                          {1, nan, 3, nan, 3, -0.0, 0, -inf, -inf,  //
                           -inf, -inf, -inf, 2, -inf, 2, 2, -1, -inf});
         expect_tensor(run1(g, {x}), DType::kI64, {2, 9},
                       {1, 3, 2, 4, 0, 5, 6, 7, 8, 3, 5, 6, 7, 0, 1, 2, 4, 8});
         Graph one = one_op(OpKind::kTopk, {{DType::kF32, {2, 9}}}, {{"k", int64_t{1}}});
         expect_tensor(run1(one, {x}), DType::kI64, {2, 1}, {1, 3});
       }});
  cases.push_back({OpKind::kTopk, "integers_and_bf16", [] {
                     Graph g = one_op(OpKind::kTopk, {{DType::kI32, {5}}}, {{"k", int64_t{3}}});
                     expect_tensor(run1(g, {T(DType::kI32, {5}, {4, 7, 4, 7, -9})}), DType::kI64,
                                   {3}, {1, 3, 0});
                     // 1 and 1 + 2^-9 are one bf16 value: a tie, so position order.
                     Graph h = one_op(OpKind::kTopk, {{DType::kBF16, {4}}}, {{"k", int64_t{2}}});
                     expect_tensor(run1(h, {T(DType::kBF16, {4}, {0.5, 1, 1.001953125, 0.75})}),
                                   DType::kI64, {2}, {1, 2});
                   }});
  cases.push_back({OpKind::kGather, "per_row_pick", [] {
                     Graph g =
                         one_op(OpKind::kGather, {{DType::kF32, {2, 3}}, {DType::kI64, {2, 1}}},
                                {{"dim", int64_t{1}}});
                     HostTensor x = T(DType::kF32, {2, 3}, {10, 11, 12, 20, 21, 22});
                     expect_tensor(run1(g, {x, T(DType::kI64, {2, 1}, {2, -3})}), DType::kF32,
                                   {2, 1}, {12, 20});
                     std::string e = run_error(g, {x, T(DType::kI64, {2, 1}, {3, 0})});
                     EXPECT_NE(e.find("out of range"), std::string::npos) << e;
                   }});
  cases.push_back(
      {OpKind::kScatter, "per_row_place", [] {
         Graph g = one_op(OpKind::kScatter,
                          {{DType::kF32, {2, 3}}, {DType::kI64, {2, 1}}, {DType::kF32, {2, 1}}},
                          {{"dim", int64_t{1}}});
         HostTensor out = run1(g, {T(DType::kF32, {2, 3}, {0, 0, 0, 1, 1, 1}),
                                   T(DType::kI64, {2, 1}, {1, 2}), T(DType::kF32, {2, 1}, {5, 6})});
         expect_tensor(out, DType::kF32, {2, 3}, {0, 5, 0, 1, 1, 6});
       }});
  cases.push_back(
      {OpKind::kSymConstant, "value_at_call_time", [] {
         GraphBuilder b;
         SymExpr s = b.symbol("s", 0);
         b.input(DType::kF32, {s});
         b.output(b.op(OpKind::kSymConstant, {},
                       {{"dtype", DType::kF32}, {"value", std::vector<SymExpr>{2 * s + 1}}}));
         Graph g = b.finish();
         expect_tensor(run1(g, {T(DType::kF32, {4}, {0, 0, 0, 0})}), DType::kF32, {}, {9});
       }});
  cases.push_back(
      {OpKind::kSinc, "zero", [] {
         Graph g = one_op(OpKind::kSinc, {{DType::kF32, {2}}});
         expect_tensor(run1(g, {T(DType::kF32, {2}, {0, -0.0})}), DType::kF32, {2}, {1, 1});
       }});
}

}  // namespace dg::testing
