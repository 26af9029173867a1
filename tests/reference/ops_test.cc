// One or more cases for every op in the catalog, each checked against hand-computed values or an
// independent double-precision formula. ReferenceCatalog fails when an op has no case.
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "op_case.h"

namespace dg::testing {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

void add_unary_cases(std::vector<OpCase>& cases) {
  struct U {
    OpKind op;
    double (*f)(double);
    bool positive;
  };
  const U table[] = {
      {OpKind::kNeg, [](double x) { return -x; }, false},
      {OpKind::kExp, [](double x) { return std::exp(x); }, false},
      {OpKind::kLog, [](double x) { return std::log(x); }, true},
      {OpKind::kSqrt, [](double x) { return std::sqrt(x); }, true},
      {OpKind::kRsqrt, [](double x) { return 1 / std::sqrt(x); }, true},
      {OpKind::kReciprocal, [](double x) { return 1 / x; }, false},
      {OpKind::kAbs, [](double x) { return std::fabs(x); }, false},
      {OpKind::kRelu, [](double x) { return x > 0 ? x : 0.0; }, false},
      {OpKind::kTanh, [](double x) { return std::tanh(x); }, false},
      {OpKind::kSigmoid, [](double x) { return sigmoid(x); }, false},
      {OpKind::kSilu, [](double x) { return x * sigmoid(x); }, false},
      {OpKind::kGelu, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, false},
      {OpKind::kSin, [](double x) { return std::sin(x); }, false},
      {OpKind::kCos, [](double x) { return std::cos(x); }, false},
      {OpKind::kErf, [](double x) { return std::erf(x); }, false},
      {OpKind::kSinc, [](double x) { return std::sin(M_PI * x) / (M_PI * x); }, false},
      {OpKind::kGeluTanh,
       [](double x) {
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
       },
       false},
  };
  for (const U& u : table) {
    cases.push_back({u.op, "f32", [u] {
                       Vals x = u.positive ? Vals{0.25, 0.5, 1.5, 3.0, 7.0, 100.0}
                                           : Vals{-2.5, -0.75, 0.125, 0.5, 1.25, 3.0};
                       Vals want;
                       for (double v : x) want.push_back(u.f(as(DType::kF32, v)));
                       Graph g = one_op(u.op, {{DType::kF32, {2, 3}}});
                       expect_tensor(run1(g, {T(DType::kF32, {2, 3}, x)}), DType::kF32, {2, 3},
                                     want, 1e-6, 1e-7);
                     }});
    cases.push_back({u.op, "bf16", [u] {
                       Vals x = u.positive ? Vals{0.3, 2.7, 11.0} : Vals{-1.7, 0.3, 2.9};
                       Vals want;
                       for (double v : x)
                         want.push_back(as(DType::kBF16, u.f(as(DType::kBF16, v))));
                       Graph g = one_op(u.op, {{DType::kBF16, {3}}});
                       // Within one bf16 ulp: double vs float evaluation may straddle a tie.
                       expect_tensor(run1(g, {T(DType::kBF16, {3}, x)}), DType::kBF16, {3}, want,
                                     8e-3, 0);
                     }});
  }
  cases.push_back({OpKind::kRelu, "nan", [] {
                     Graph g = one_op(OpKind::kRelu, {{DType::kF32, {3}}});
                     expect_tensor(run1(g, {T(DType::kF32, {3}, {kNaN, -1, 2})}), DType::kF32, {3},
                                   {kNaN, 0, 2});
                   }});
  for (OpKind op : {OpKind::kNeg, OpKind::kAbs})
    cases.push_back(
        {op, "i64", [op] {
           Graph g = one_op(op, {{DType::kI64, {3}}});
           Vals want = op == OpKind::kNeg ? Vals{3, -5, 0} : Vals{3, 5, 0};
           expect_tensor(run1(g, {T(DType::kI64, {3}, {-3, 5, 0})}), DType::kI64, {3}, want);
         }});
}

void add_binary_cases(std::vector<OpCase>& cases) {
  struct B {
    OpKind op;
    double (*f)(double, double);
  };
  const B table[] = {
      {OpKind::kAdd, [](double a, double b) { return a + b; }},
      {OpKind::kSub, [](double a, double b) { return a - b; }},
      {OpKind::kMul, [](double a, double b) { return a * b; }},
      {OpKind::kDiv, [](double a, double b) { return a / b; }},
      {OpKind::kMaximum,
       [](double a, double b) { return std::isnan(a + b) ? kNaN : std::max(a, b); }},
      {OpKind::kMinimum,
       [](double a, double b) { return std::isnan(a + b) ? kNaN : std::min(a, b); }},
      {OpKind::kPow, [](double a, double b) { return std::pow(a, b); }},
      {OpKind::kSiluBackward,
       [](double g, double x) { return g * sigmoid(x) * (1 + x * (1 - sigmoid(x))); }},
      {OpKind::kSigmoidBackward, [](double g, double y) { return g * y * (1 - y); }},
      {OpKind::kGeluBackward,  // d/dx x * Phi(x) = Phi(x) + x * phi(x)
       [](double g, double x) {
         return g * (0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
                     x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI));
       }},
      {OpKind::kGeluTanhBackward,  // by a central difference of the tanh form
       [](double g, double x) {
         auto f = [](double v) {
           return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
         };
         const double h = 1e-6;
         return g * (f(x + h) - f(x - h)) / (2 * h);
       }},
  };
  for (const B& bin : table) {
    cases.push_back(
        {bin.op, "f32_broadcast", [bin] {
           Vals x = {0.5, 1.5, 2.0, 3.25, 0.75, 4.0};  // [2, 3]
           Vals y = {0.25, -1.5, 2.0};                 // [3], broadcast over rows
           if (bin.op == OpKind::kMaximum || bin.op == OpKind::kMinimum) x[1] = kNaN;
           Vals want;
           for (int i = 0; i < 6; ++i) want.push_back(bin.f(x[i], y[i % 3]));
           Graph g = one_op(bin.op, {{DType::kF32, {2, 3}}, {DType::kF32, {3}}});
           HostTensor out = run1(g, {T(DType::kF32, {2, 3}, x), T(DType::kF32, {3}, y)});
           expect_tensor(out, DType::kF32, {2, 3}, want, 1e-6, 1e-7);
         }});
  }
  for (OpKind op : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kMaximum, OpKind::kMinimum})
    cases.push_back(
        {op, "i32", [op] {
           Graph g = one_op(op, {{DType::kI32, {2}}, {DType::kI32, {2}}});
           HostTensor out = run1(g, {T(DType::kI32, {2}, {7, -3}), T(DType::kI32, {2}, {-2, 4})});
           Vals want = {op == OpKind::kAdd       ? 5.0
                        : op == OpKind::kSub     ? 9.0
                        : op == OpKind::kMul     ? -14.0
                        : op == OpKind::kMaximum ? 7.0
                                                 : -2.0,
                        op == OpKind::kAdd       ? 1.0
                        : op == OpKind::kSub     ? -7.0
                        : op == OpKind::kMul     ? -12.0
                        : op == OpKind::kMaximum ? 4.0
                                                 : -3.0};
           expect_tensor(out, DType::kI32, {2}, want);
         }});
}

void add_compare_cases(std::vector<OpCase>& cases) {
  struct C {
    OpKind op;
    bool (*f)(double, double);
  };
  const C table[] = {
      {OpKind::kEq, [](double a, double b) { return a == b; }},
      {OpKind::kNe, [](double a, double b) { return a != b; }},
      {OpKind::kLt, [](double a, double b) { return a < b; }},
      {OpKind::kLe, [](double a, double b) { return a <= b; }},
      {OpKind::kGt, [](double a, double b) { return a > b; }},
      {OpKind::kGe, [](double a, double b) { return a >= b; }},
  };
  for (const C& c : table)
    cases.push_back(
        {c.op, "f32_broadcast", [c] {
           Vals x = {1, 2, 3, kNaN, 2, -1};  // [2, 3]
           Vals y = {2, 2, kNaN};            // [3]
           Vals want;
           for (int i = 0; i < 6; ++i) want.push_back(c.f(x[i], y[i % 3]) ? 1 : 0);
           Graph g = one_op(c.op, {{DType::kF32, {2, 3}}, {DType::kF32, {3}}});
           HostTensor out = run1(g, {T(DType::kF32, {2, 3}, x), T(DType::kF32, {3}, y)});
           expect_tensor(out, DType::kBool, {2, 3}, want);
         }});
}

void add_create_cast_cases(std::vector<OpCase>& cases) {
  cases.push_back(
      {OpKind::kConstant, "dtypes", [] {
         struct K {
           DType dtype;
           double value, want;
         };
         for (K k : {K{DType::kBF16, 0.1, 0.10009765625}, K{DType::kF32, 1.5, 1.5},
                     K{DType::kI64, -2.7, -2}, K{DType::kBool, 0.5, 1}}) {
           GraphBuilder b;
           b.output(b.op(OpKind::kConstant, {}, {{"value", k.value}, {"dtype", k.dtype}}));
           expect_tensor(run1(b.finish(), {}), k.dtype, {}, {k.want});
         }
       }});
  cases.push_back(
      {OpKind::kFull, "symbolic_shape", [] {
         GraphBuilder b;
         SymExpr s = b.symbol("s");
         b.input(DType::kF32, {s});
         b.output(b.op(
             OpKind::kFull, {},
             {{"value", 3.25}, {"dtype", DType::kF32}, {"shape", std::vector<SymExpr>{s, 2}}}));
         expect_tensor(run1(b.finish(), {make_tensor(DType::kF32, {3})}), DType::kF32, {3, 2},
                       Vals(6, 3.25));
       }});
  cases.push_back({OpKind::kCast, "f32_to_all", [] {
                     Vals x = {-2.7, 2.7, 0.5, kNaN, 1e10, 0.0};
                     HostTensor in = T(DType::kF32, {6}, x);
                     const double imin = std::numeric_limits<int32_t>::min();
                     struct K {
                       DType to;
                       Vals want;
                     };
                     for (const K& k : {K{DType::kI32, {-2, 2, 0, imin, imin, 0}},
                                        K{DType::kBool, {1, 1, 1, 1, 1, 0}}, K{DType::kBF16, {}},
                                        K{DType::kF64, {}}}) {
                       Graph g = one_op(OpKind::kCast, {{DType::kF32, {6}}}, {{"dtype", k.to}});
                       Vals want = k.want;
                       if (want.empty())  // float targets: the f32 value, rounded to the target
                         for (double v : x) want.push_back(as(k.to, as(DType::kF32, v)));
                       expect_tensor(run1(g, {in}), k.to, {6}, want);
                     }
                   }});
  cases.push_back(
      {OpKind::kCast, "ints_to_float", [] {
         Graph g = one_op(OpKind::kCast, {{DType::kI64, {3}}}, {{"dtype", DType::kF32}});
         expect_tensor(run1(g, {T(DType::kI64, {3}, {-4, 16777217, 7})}), DType::kF32, {3},
                       {-4, 16777216, 7});
         Graph h = one_op(OpKind::kCast, {{DType::kBool, {2}}}, {{"dtype", DType::kBF16}});
         expect_tensor(run1(h, {T(DType::kBool, {2}, {1, 0})}), DType::kBF16, {2}, {1, 0});
       }});
  cases.push_back({OpKind::kWhere, "broadcast_scalar", [] {
                     Graph g =
                         one_op(OpKind::kWhere,
                                {{DType::kBool, {2, 3}}, {DType::kF32, {2, 3}}, {DType::kF32, {}}});
                     HostTensor out = run1(
                         g, {T(DType::kBool, {2, 3}, {1, 0, 1, 0, 0, 1}),
                             T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}), T(DType::kF32, {}, {-9})});
                     expect_tensor(out, DType::kF32, {2, 3}, {1, -9, 3, -9, -9, 6});
                   }});
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  add_unary_cases(cases);
  add_binary_cases(cases);
  add_compare_cases(cases);
  add_create_cast_cases(cases);
  add_structural_cases(cases);
  add_thunder_coverage_cases(cases);
  add_grouped_cases(cases);
  return cases;
}

class ReferenceOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(ReferenceOps, MatchesExpected) { GetParam().body(); }

INSTANTIATE_TEST_SUITE_P(Catalog, ReferenceOps, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return std::string(op_name(info.param.op)) + "_" + info.param.label +
                                  "_" + std::to_string(info.index);
                         });

TEST(ReferenceCatalog, EveryOpHasACase) {
  std::set<OpKind> covered;
  for (const OpCase& c : all_cases()) covered.insert(c.op);
  int count = 0;
  const OpInfo* ops = all_ops(&count);
  ASSERT_GT(count, 0);
  for (int i = 0; i < count; ++i)
    EXPECT_TRUE(covered.count(ops[i].kind)) << "no reference test case for op " << ops[i].name;
}

}  // namespace
}  // namespace dg::testing
