// Cases for the structural ops: contractions, reductions, layout and index ops.
#include <cmath>
#include <limits>

#include "op_case.h"

namespace dg::testing {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Vals iota(int n, double start = 0) {
  Vals v;
  for (int i = 0; i < n; ++i) v.push_back(start + i);
  return v;
}

Attrs reduce_attrs(std::vector<int64_t> dims, int64_t keepdim) {
  return {{"dims", std::move(dims)}, {"keepdim", keepdim}};
}

void add_matmul_cases(std::vector<OpCase>& cases) {
  cases.push_back({OpKind::kLinear, "bias", [] {
                     Graph g =
                         one_op(OpKind::kLinear,
                                {{DType::kF32, {2, 3}}, {DType::kF32, {2, 3}}, {DType::kF32, {2}}});
                     HostTensor out = run1(g, {T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                                               T(DType::kF32, {2, 3}, {1, 0, -1, 0.5, 0.5, 0.5}),
                                               T(DType::kF32, {2}, {10, -1})});
                     expect_tensor(out, DType::kF32, {2, 2}, {8, 2, 8, 6.5});
                   }});
  cases.push_back({OpKind::kLinear, "symbolic_rank3_nobias", [] {
                     GraphBuilder b;
                     SymExpr s = b.symbol("s");
                     ValueId x = b.input(DType::kF32, {1, s, 3});
                     ValueId w = b.input(DType::kF32, {2, 3});
                     b.output(b.op(OpKind::kLinear, {x, w}));
                     HostTensor out =
                         run1(b.finish(), {T(DType::kF32, {1, 2, 3}, {1, 2, 3, 4, 5, 6}),
                                           T(DType::kF32, {2, 3}, {1, 0, -1, 0.5, 0.5, 0.5})});
                     expect_tensor(out, DType::kF32, {1, 2, 2}, {-2, 3, -2, 7.5});
                   }});
  cases.push_back(
      {OpKind::kMatmul, "batch_broadcast", [] {
         // a[2, 1, 2, 3] @ b[3, 3, 2] -> [2, 3, 2, 2]; naive loops as the oracle.
         Vals av = iota(12, -5), bv = iota(18, -9);
         for (double& v : bv) v *= 0.5;
         Vals want;
         for (int i = 0; i < 2; ++i)
           for (int j = 0; j < 3; ++j)
             for (int m = 0; m < 2; ++m)
               for (int n = 0; n < 2; ++n) {
                 double acc = 0;
                 for (int k = 0; k < 3; ++k) acc += av[i * 6 + m * 3 + k] * bv[j * 6 + k * 2 + n];
                 want.push_back(acc);
               }
         Graph g = one_op(OpKind::kMatmul, {{DType::kF32, {2, 1, 2, 3}}, {DType::kF32, {3, 3, 2}}});
         HostTensor out =
             run1(g, {T(DType::kF32, {2, 1, 2, 3}, av), T(DType::kF32, {3, 3, 2}, bv)});
         expect_tensor(out, DType::kF32, {2, 3, 2, 2}, want);
       }});
}

void add_reduce_cases(std::vector<OpCase>& cases) {
  // x[i, j, k] = 12 i + 4 j + k over [2, 3, 4].
  cases.push_back(
      {OpKind::kSum, "dims", [] {
         HostTensor x = T(DType::kF32, {2, 3, 4}, iota(24));
         Graph g = one_op(OpKind::kSum, {{DType::kF32, {2, 3, 4}}}, reduce_attrs({1}, 0));
         Vals want;
         for (int i = 0; i < 2; ++i)
           for (int k = 0; k < 4; ++k) want.push_back(36 * i + 3 * k + 12);
         expect_tensor(run1(g, {x}), DType::kF32, {2, 4}, want);
         Graph h = one_op(OpKind::kSum, {{DType::kF32, {2, 3, 4}}}, reduce_attrs({-1, 0}, 1));
         expect_tensor(run1(h, {x}), DType::kF32, {1, 3, 1}, {60, 92, 124});
       }});
  cases.push_back(
      {OpKind::kSum, "bf16_to_f32_dtype", [] {
         Attrs attrs = reduce_attrs({0}, 0);
         attrs.set("dtype", DType::kF32);
         Graph g = one_op(OpKind::kSum, {{DType::kBF16, {3}}}, attrs);
         // 256 + 1 + 1 is exact in f32 but not in bf16.
         expect_tensor(run1(g, {T(DType::kBF16, {3}, {256, 1, 1})}), DType::kF32, {}, {258});
       }});
  cases.push_back(
      {OpKind::kMean, "dims", [] {
         Graph g = one_op(OpKind::kMean, {{DType::kF32, {2, 3, 4}}}, reduce_attrs({1}, 1));
         Vals want;
         for (int i = 0; i < 2; ++i)
           for (int k = 0; k < 4; ++k) want.push_back(12 * i + k + 4);
         expect_tensor(run1(g, {T(DType::kF32, {2, 3, 4}, iota(24))}), DType::kF32, {2, 1, 4},
                       want);
       }});
  cases.push_back({OpKind::kAmax, "nan_and_inf", [] {
                     Graph g = one_op(OpKind::kAmax, {{DType::kF32, {2, 3}}}, reduce_attrs({0}, 0));
                     HostTensor out = run1(g, {T(DType::kF32, {2, 3}, {1, kNaN, 3, 4, 2, -kInf})});
                     expect_tensor(out, DType::kF32, {3}, {4, kNaN, 3});
                   }});
}

void add_layout_cases(std::vector<OpCase>& cases) {
  cases.push_back(
      {OpKind::kReshape, "symbolic", [] {
         GraphBuilder b;
         SymExpr s = b.symbol("s");
         ValueId x = b.input(DType::kF32, {s, 4});
         b.output(b.op(OpKind::kReshape, {x}, {{"shape", std::vector<SymExpr>{2 * s, 2}}}));
         expect_tensor(run1(b.finish(), {T(DType::kF32, {3, 4}, iota(12))}), DType::kF32, {6, 2},
                       iota(12));
       }});
  cases.push_back({OpKind::kPermute, "rank3", [] {
                     Graph g = one_op(OpKind::kPermute, {{DType::kBF16, {2, 3, 4}}},
                                      {{"dims", std::vector<int64_t>{2, 0, -2}}});
                     Vals want;  // out[k, i, j] = x[i, j, k]
                     for (int k = 0; k < 4; ++k)
                       for (int i = 0; i < 2; ++i)
                         for (int j = 0; j < 3; ++j) want.push_back(12 * i + 4 * j + k);
                     expect_tensor(run1(g, {T(DType::kBF16, {2, 3, 4}, iota(24))}), DType::kBF16,
                                   {4, 2, 3}, want);
                   }});
  cases.push_back(
      {OpKind::kExpand, "new_and_unit_dims", [] {
         Graph g = one_op(OpKind::kExpand, {{DType::kI64, {3, 1}}}, {{"shape", sd({2, 3, 4})}});
         Vals want;
         for (int a = 0; a < 2; ++a)
           for (int b = 0; b < 3; ++b)
             for (int c = 0; c < 4; ++c) want.push_back(10 * b);
         expect_tensor(run1(g, {T(DType::kI64, {3, 1}, {0, 10, 20})}), DType::kI64, {2, 3, 4},
                       want);
       }});
  cases.push_back(
      {OpKind::kSlice, "step", [] {
         Graph g = one_op(
             OpKind::kSlice, {{DType::kF32, {2, 5}}},
             {{"dim", int64_t{1}}, {"start", sd({1})}, {"end", sd({5})}, {"step", int64_t{2}}});
         expect_tensor(run1(g, {T(DType::kF32, {2, 5}, iota(10))}), DType::kF32, {2, 2},
                       {1, 3, 6, 8});
       }});
  cases.push_back(
      {OpKind::kSlice, "symbolic_end", [] {
         GraphBuilder b;
         SymExpr s = b.symbol("s");
         ValueId x = b.input(DType::kF32, {s});
         b.output(
             b.op(OpKind::kSlice, {x},
                  {{"dim", int64_t{0}}, {"start", sd({1})}, {"end", std::vector<SymExpr>{s - 1}}}));
         expect_tensor(run1(b.finish(), {T(DType::kF32, {5}, iota(5))}), DType::kF32, {3},
                       {1, 2, 3});
       }});
  cases.push_back(
      {OpKind::kCat, "dims", [] {
         Graph g = one_op(OpKind::kCat, {{DType::kF32, {2, 2}}, {DType::kF32, {1, 2}}},
                          {{"dim", int64_t{0}}});
         expect_tensor(
             run1(g, {T(DType::kF32, {2, 2}, {1, 2, 3, 4}), T(DType::kF32, {1, 2}, {5, 6})}),
             DType::kF32, {3, 2}, {1, 2, 3, 4, 5, 6});
         Graph h = one_op(OpKind::kCat,
                          {{DType::kF32, {2, 1}}, {DType::kF32, {2, 2}}, {DType::kF32, {2, 0}}},
                          {{"dim", int64_t{-1}}});
         expect_tensor(run1(h, {T(DType::kF32, {2, 1}, {1, 2}),
                                T(DType::kF32, {2, 2}, {3, 4, 5, 6}), T(DType::kF32, {2, 0}, {})}),
                       DType::kF32, {2, 3}, {1, 3, 4, 2, 5, 6});
       }});
}

void add_index_cases(std::vector<OpCase>& cases) {
  cases.push_back({OpKind::kIndexSelect, "dim0_negative", [] {
                     Graph g =
                         one_op(OpKind::kIndexSelect, {{DType::kF32, {4, 2}}, {DType::kI64, {3}}},
                                {{"dim", int64_t{0}}});
                     HostTensor out = run1(
                         g, {T(DType::kF32, {4, 2}, iota(8)), T(DType::kI64, {3}, {2, -1, 0})});
                     expect_tensor(out, DType::kF32, {3, 2}, {4, 5, 6, 7, 0, 1});
                   }});
  cases.push_back(
      {OpKind::kIndexSelect, "dim1_i32", [] {
         Graph g = one_op(OpKind::kIndexSelect, {{DType::kBF16, {2, 3}}, {DType::kI32, {2}}},
                          {{"dim", int64_t{-1}}});
         HostTensor out = run1(g, {T(DType::kBF16, {2, 3}, iota(6)), T(DType::kI32, {2}, {2, 2})});
         expect_tensor(out, DType::kBF16, {2, 2}, {2, 2, 5, 5});
       }});
  cases.push_back({OpKind::kIndexAdd, "duplicates_alpha", [] {
                     Graph g =
                         one_op(OpKind::kIndexAdd,
                                {{DType::kF32, {3, 2}}, {DType::kI64, {3}}, {DType::kF32, {3, 2}}},
                                {{"dim", int64_t{0}}, {"alpha", 2.0}});
                     HostTensor out = run1(
                         g, {T(DType::kF32, {3, 2}, Vals(6, 1)), T(DType::kI64, {3}, {0, 2, 0}),
                             T(DType::kF32, {3, 2}, {1, 2, 3, 4, 5, 6})});
                     // row 0 += 2 * (src0 + src2), row 2 += 2 * src1
                     expect_tensor(out, DType::kF32, {3, 2}, {13, 17, 1, 1, 7, 9});
                   }});
  cases.push_back({OpKind::kIndexAdd, "dim1_default_alpha", [] {
                     Graph g =
                         one_op(OpKind::kIndexAdd,
                                {{DType::kI64, {2, 3}}, {DType::kI32, {2}}, {DType::kI64, {2, 2}}},
                                {{"dim", int64_t{1}}});
                     HostTensor out =
                         run1(g, {T(DType::kI64, {2, 3}, Vals(6, 0)), T(DType::kI32, {2}, {-1, 0}),
                                  T(DType::kI64, {2, 2}, {1, 2, 3, 4})});
                     expect_tensor(out, DType::kI64, {2, 3}, {2, 0, 1, 4, 0, 3});
                   }});
}

}  // namespace

void add_structural_cases(std::vector<OpCase>& cases) {
  add_matmul_cases(cases);
  add_reduce_cases(cases);
  add_layout_cases(cases);
  add_index_cases(cases);
}

}  // namespace dg::testing
