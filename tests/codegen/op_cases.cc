#include "tests/codegen/op_cases.h"

#include <functional>

namespace dg {

namespace {

// Builds `graph(x: dtype[n, 24]) -> op(...)` style cases.
struct CaseBuilder {
  std::vector<OpCase>* out;

  void add(const std::string& name, OpKind op,
           const std::function<void(GraphBuilder&, SymExpr)>& body) {
    GraphBuilder b(name);
    SymExpr n = b.symbol("n", 0);
    body(b, n);
    out->push_back({name, op, b.finish()});
  }
};

// The ops added for ThunderFX coverage, and float16 through every category.
void add_thunder_coverage_cases(CaseBuilder& c) {
  const SymExpr k24(24);
  for (OpKind op : {OpKind::kSin, OpKind::kCos, OpKind::kErf, OpKind::kSinc, OpKind::kGeluTanh}) {
    c.add(std::string(op_name(op)), op, [&](GraphBuilder& b, SymExpr n) {
      ValueId x = b.input(DType::kBF16, {n, k24});
      b.output(b.op(op, {x}));
      ValueId h = b.input(DType::kF16, {n, k24});
      b.output(b.op(op, {h}));
    });
  }
  c.add("sinc_at_zero", OpKind::kSinc, [&](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF32, {n, k24});
    ValueId zeros = b.op(OpKind::kRelu, {b.op(OpKind::kNeg, {b.op(OpKind::kAbs, {x})})});
    b.output(b.op(OpKind::kSinc, {zeros}));  // exact zeros (and -0): sinc is 1 there
  });
  for (OpKind op : {OpKind::kGeluBackward, OpKind::kGeluTanhBackward}) {
    c.add(std::string(op_name(op)), op, [&](GraphBuilder& b, SymExpr n) {
      ValueId g = b.input(DType::kBF16, {n, k24});
      ValueId x = b.input(DType::kBF16, {n, k24});
      b.output(b.op(op, {g, x}));
      ValueId y = b.input(DType::kF32, {k24});
      b.output(b.op(op, {g, y}));  // promotion to f32 with broadcasting
    });
  }
  c.add("cumsum", OpKind::kCumsum, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kBF16, {n, 6, 5});
    b.output(b.op(OpKind::kCumsum, {x}, {{"dim", int64_t{0}}}));
    b.output(b.op(OpKind::kCumsum, {x}, {{"dim", int64_t{-1}}, {"dtype", DType::kF32}}));
    ValueId m = b.input(DType::kBool, {n});
    b.output(b.op(OpKind::kCumsum, {m}, {{"dim", int64_t{0}}}));  // bool -> i64 counts
  });
  c.add("topk", OpKind::kTopk, [](GraphBuilder& b, SymExpr n) {
    // Note [Top-k op]: ties (small integers as f32, and i64), -inf runs past the finite values
    // (k = 16 of 24), NaNs first, k = 1, and k = the row's length over rank-3 bf16 rows.
    auto topk = [&](ValueId x, int64_t k) { return b.op(OpKind::kTopk, {x}, {{"k", k}}); };
    ValueId x = b.input(DType::kF32, {n, 24});
    ValueId three = b.op(OpKind::kConstant, {}, {{"dtype", DType::kF32}, {"value", 3.0}});
    ValueId steps = b.op(OpKind::kCast, {b.op(OpKind::kMul, {x, three})}, {{"dtype", DType::kI64}});
    ValueId ties = b.op(OpKind::kCast, {steps}, {{"dtype", DType::kF32}});
    ValueId idx = topk(ties, 8);
    b.output(idx);
    b.output(b.op(OpKind::kGather, {ties, idx}, {{"dim", int64_t{1}}}));
    b.output(topk(steps, 1));
    b.output(topk(b.op(OpKind::kLog, {b.op(OpKind::kRelu, {x})}), 16));  // -inf where x <= 0
    b.output(topk(b.op(OpKind::kSqrt, {x}), 8));                         // NaN where x < 0
    b.output(topk(b.input(DType::kBF16, {n, 5, 7}), 7));
  });
  c.add("sym_constant", OpKind::kSymConstant, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF32, {n, 3});
    ValueId count = b.op(OpKind::kSymConstant, {},
                         {{"dtype", DType::kF32}, {"value", std::vector<SymExpr>{n * SymExpr(3)}}});
    b.output(b.op(OpKind::kDiv, {x, count}));
    b.output(b.op(OpKind::kSymConstant, {},
                  {{"dtype", DType::kI64}, {"value", std::vector<SymExpr>{n - SymExpr(1)}}}));
  });
  c.add("index_copy", OpKind::kIndexCopy, [](GraphBuilder& b, SymExpr n) {
    // A permutation of 0..n-1 (n-1 down to 0), so no index repeats.
    ValueId x = b.input(DType::kBF16, {n, 12});
    ValueId src = b.input(DType::kBF16, {n, 12});
    ValueId ones =
        b.op(OpKind::kFull, {},
             {{"dtype", DType::kI64}, {"value", 1.0}, {"shape", std::vector<SymExpr>{n}}});
    ValueId count = b.op(OpKind::kSymConstant, {},
                         {{"dtype", DType::kI64}, {"value", std::vector<SymExpr>{n}}});
    ValueId idx = b.op(OpKind::kSub, {count, b.op(OpKind::kCumsum, {ones}, {{"dim", int64_t{0}}})});
    b.output(b.op(OpKind::kIndexCopy, {x, idx, src}, {{"dim", int64_t{0}}}));
    ValueId xh = b.op(OpKind::kCast, {x}, {{"dtype", DType::kF16}});
    ValueId sh = b.op(OpKind::kCast, {src}, {{"dtype", DType::kF16}});
    b.output(b.op(OpKind::kIndexCopy, {xh, idx, sh}, {{"dim", int64_t{0}}}));
  });
  c.add("gather", OpKind::kGather, [](GraphBuilder& b, SymExpr n) {
    // nll_loss's pick: x[i, target[i]].
    ValueId x = b.input(DType::kF32, {n, 7});
    ValueId t = b.input(DType::kI64, {n, 1});
    b.output(b.op(OpKind::kGather, {x, t}, {{"dim", int64_t{1}}}));
    ValueId y = b.input(DType::kBF16, {n, 4, 3});
    ValueId u = b.input(DType::kI64, {n, 2, 3});
    b.output(b.op(OpKind::kGather, {y, u}, {{"dim", int64_t{1}}}));
  });
  c.add("scatter", OpKind::kScatter, [](GraphBuilder& b, SymExpr n) {
    // nll_loss_backward's placement: out[i, target[i]] = src[i] (one write per row).
    ValueId x = b.input(DType::kF16, {n, 7});
    ValueId t = b.input(DType::kI64, {n, 1});
    ValueId src = b.input(DType::kF16, {n, 1});
    b.output(b.op(OpKind::kScatter, {x, t, src}, {{"dim", int64_t{1}}}));
  });
  c.add("f16_elementwise", OpKind::kAdd, [&](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF16, {n, k24});
    ValueId y = b.input(DType::kF16, {k24});
    ValueId s = b.op(OpKind::kSilu, {b.op(OpKind::kMul, {x, y})});
    b.output(b.op(OpKind::kAdd, {s, x}));
    b.output(b.op(OpKind::kCast,
                  {
                      s,
                  },
                  {{"dtype", DType::kBF16}}));
    b.output(b.op(OpKind::kGt, {x, y}));
    b.output(
        b.op(OpKind::kFull, {},
             {{"dtype", DType::kF16}, {"value", 65519.0}, {"shape", std::vector<SymExpr>{n}}}));
  });
  c.add("f16_linear_reduce_layout", OpKind::kLinear, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF16, {n, 40});
    ValueId w = b.input(DType::kF16, {70, 40});
    ValueId bias = b.input(DType::kF16, {70});
    ValueId y = b.op(OpKind::kLinear, {x, w, bias});
    b.output(y);
    b.output(b.op(OpKind::kSum, {y}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", int64_t{0}}}));
    b.output(b.op(OpKind::kPermute, {y}, {{"dims", std::vector<int64_t>{1, 0}}}));
    ValueId rows = b.input(DType::kF16, {7, 40});
    ValueId idx = b.input(DType::kI64, {n});
    ValueId src = b.input(DType::kF16, {n, 40});
    b.output(b.op(OpKind::kIndexAdd, {rows, idx, src}, {{"dim", int64_t{0}}}));
  });
}

}  // namespace

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> cases;
  CaseBuilder c{&cases};
  const SymExpr k24(24);

  c.add("constant", OpKind::kConstant, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF32, {n, 3});
    ValueId k = b.op(OpKind::kConstant, {}, {{"dtype", DType::kF32}, {"value", 1.5}});
    b.output(k);
    b.output(b.op(OpKind::kMul, {x, k}));
  });
  c.add("full", OpKind::kFull, [](GraphBuilder& b, SymExpr n) {
    b.input(DType::kF32, {n});
    b.output(
        b.op(OpKind::kFull, {},
             {{"dtype", DType::kBF16}, {"value", -2.25}, {"shape", std::vector<SymExpr>{n, 5}}}));
  });
  c.add("cast", OpKind::kCast, [&](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF32, {n, k24});
    b.output(b.op(OpKind::kCast, {x}, {{"dtype", DType::kBF16}}));
    b.output(b.op(OpKind::kCast, {x}, {{"dtype", DType::kI64}}));
    b.output(b.op(OpKind::kCast, {x}, {{"dtype", DType::kBool}}));
  });
  for (OpKind op : {OpKind::kNeg, OpKind::kExp, OpKind::kLog, OpKind::kSqrt, OpKind::kRsqrt,
                    OpKind::kReciprocal, OpKind::kAbs, OpKind::kRelu, OpKind::kTanh,
                    OpKind::kSigmoid, OpKind::kSilu, OpKind::kGelu}) {
    bool positive = op == OpKind::kLog || op == OpKind::kSqrt || op == OpKind::kRsqrt;
    c.add(std::string(op_name(op)), op, [&](GraphBuilder& b, SymExpr n) {
      ValueId x = b.input(DType::kBF16, {n, k24});
      if (positive) x = b.op(OpKind::kExp, {x});  // keep the domain valid
      b.output(b.op(op, {x}));
    });
  }
  for (OpKind op :
       {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv, OpKind::kMaximum, OpKind::kMinimum,
        OpKind::kPow, OpKind::kSiluBackward, OpKind::kSigmoidBackward}) {
    c.add(std::string(op_name(op)), op, [&](GraphBuilder& b, SymExpr n) {
      // bf16[n, 24] with f32[24] broadcast: promotion to f32 as in PyTorch.
      ValueId x = b.input(DType::kBF16, {n, k24});
      ValueId y = b.input(DType::kF32, {k24});
      if (op == OpKind::kPow) x = b.op(OpKind::kExp, {x});
      b.output(b.op(op, {x, y}));
    });
  }
  for (OpKind op : {OpKind::kEq, OpKind::kNe, OpKind::kLt, OpKind::kLe, OpKind::kGt, OpKind::kGe}) {
    c.add(std::string(op_name(op)), op, [&](GraphBuilder& b, SymExpr n) {
      ValueId x = b.input(DType::kF32, {n, 1});
      ValueId y = b.input(DType::kF32, {1, 7});
      ValueId r = b.op(OpKind::kRelu, {x});  // many exact zeros make eq/ne interesting
      ValueId z = b.op(OpKind::kRelu, {y});
      b.output(b.op(op, {r, z}));
    });
  }
  c.add("where", OpKind::kWhere, [&](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF32, {n, k24});
    ValueId y = b.input(DType::kF32, {k24});
    ValueId zero = b.op(OpKind::kConstant, {}, {{"dtype", DType::kF32}, {"value", 0.0}});
    ValueId cond = b.op(OpKind::kGt, {x, zero});
    b.output(b.op(OpKind::kWhere, {cond, x, y}));
  });
  c.add("linear", OpKind::kLinear, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kBF16, {n, 40});
    ValueId w = b.input(DType::kBF16, {70, 40});
    ValueId bias = b.input(DType::kBF16, {70});
    b.output(b.op(OpKind::kLinear, {x, w}));
    b.output(b.op(OpKind::kLinear, {x, w, bias}));
  });
  c.add("linear_3d_f32", OpKind::kLinear, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF32, {2, n, 33});
    ValueId w = b.input(DType::kF32, {17, 33});
    b.output(b.op(OpKind::kLinear, {x, w}));
  });
  c.add("matmul", OpKind::kMatmul, [](GraphBuilder& b, SymExpr n) {
    // Weight-gradient shape: K is the dynamic token count.
    ValueId a = b.input(DType::kF32, {20, n});
    ValueId x = b.input(DType::kF32, {n, 36});
    b.output(b.op(OpKind::kMatmul, {a, x}));
  });
  c.add("matmul_batched", OpKind::kMatmul, [](GraphBuilder& b, SymExpr n) {
    ValueId a = b.input(DType::kBF16, {3, n, 9});
    ValueId x = b.input(DType::kBF16, {9, 66});
    ValueId p = b.op(OpKind::kPermute, {x}, {{"dims", std::vector<int64_t>{1, 0}}});
    ValueId q = b.op(OpKind::kPermute, {p}, {{"dims", std::vector<int64_t>{1, 0}}});
    b.output(b.op(OpKind::kMatmul, {a, q}));
  });
  for (OpKind op : {OpKind::kSum, OpKind::kMean, OpKind::kAmax}) {
    c.add(std::string(op_name(op)), op, [&](GraphBuilder& b, SymExpr n) {
      ValueId x = b.input(DType::kBF16, {n, 6, 5});
      b.output(b.op(op, {x}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", int64_t{0}}}));
      b.output(b.op(op, {x}, {{"dims", std::vector<int64_t>{-1, 1}}, {"keepdim", int64_t{1}}}));
    });
  }
  c.add("reshape", OpKind::kReshape, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kBF16, {n, 6, 4});
    b.output(b.op(OpKind::kReshape, {x}, {{"shape", std::vector<SymExpr>{n * SymExpr(2), 12}}}));
  });
  c.add("permute", OpKind::kPermute, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF32, {n, 6, 4});
    b.output(b.op(OpKind::kPermute, {x}, {{"dims", std::vector<int64_t>{2, 0, 1}}}));
  });
  c.add("expand", OpKind::kExpand, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF32, {n, 1});
    b.output(b.op(OpKind::kExpand, {x}, {{"shape", std::vector<SymExpr>{3, n, 8}}}));
  });
  c.add("slice", OpKind::kSlice, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kBF16, {n, 30});
    b.output(b.op(OpKind::kSlice, {x},
                  {{"dim", int64_t{1}},
                   {"start", std::vector<SymExpr>{3}},
                   {"end", std::vector<SymExpr>{29}},
                   {"step", int64_t{4}}}));
    b.output(b.op(OpKind::kSlice, {x},
                  {{"dim", int64_t{0}},
                   {"start", std::vector<SymExpr>{0}},
                   {"end", std::vector<SymExpr>{n}},
                   {"step", int64_t{2}}}));
  });
  c.add("cat", OpKind::kCat, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kF32, {n, 5});
    ValueId y = b.input(DType::kF32, {n, 3});
    b.output(b.op(OpKind::kCat, {x, y, x}, {{"dim", int64_t{-1}}}));
  });
  c.add("index_select", OpKind::kIndexSelect, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kBF16, {50, 12});
    ValueId idx = b.input(DType::kI64, {n});
    b.output(b.op(OpKind::kIndexSelect, {x, idx}, {{"dim", int64_t{0}}}));
  });
  c.add("index_add", OpKind::kIndexAdd, [](GraphBuilder& b, SymExpr n) {
    ValueId x = b.input(DType::kBF16, {50, 12});
    ValueId idx = b.input(DType::kI64, {n});
    ValueId src = b.input(DType::kBF16, {n, 12});
    b.output(b.op(OpKind::kIndexAdd, {x, idx, src}, {{"dim", int64_t{0}}, {"alpha", 0.5}}));
    ValueId xf = b.op(OpKind::kCast, {x}, {{"dtype", DType::kF32}});
    ValueId sf = b.op(OpKind::kCast, {src}, {{"dtype", DType::kF32}});
    b.output(b.op(OpKind::kIndexAdd, {xf, idx, sf}, {{"dim", int64_t{0}}}));
  });
  add_thunder_coverage_cases(c);
  c.add("grouped_experts", OpKind::kGroupedMm, [](GraphBuilder& b, SymExpr n) {
    // Routing of n tokens x 2 slots over 4 experts, then grouped GEMMs over the 2n routed rows:
    // bf16 with a fused [E, N, K] weight (tensor cores), f32 with per-expert [K, N] weights
    // (scalar tile), and the weight gradient.
    ValueId idx = b.input(DType::kI64, {n, 2});
    ValueId offs = b.op(OpKind::kExpertOffsets, {idx}, {{"num_experts", int64_t{4}}});
    b.output(offs);
    b.output(b.op(OpKind::kExpertOrder, {idx}, {{"num_experts", int64_t{4}}}));
    ValueId a = b.input(DType::kBF16, {2 * n, 24});
    ValueId w = b.input(DType::kBF16, {4, 40, 24});
    b.output(b.op(OpKind::kGroupedMm, {a, offs, w}, {{"w_layout", int64_t{0}}}));
    ValueId af = b.input(DType::kF32, {2 * n, 12});
    std::vector<ValueId> in{af, offs};
    for (int e = 0; e < 4; ++e) in.push_back(b.input(DType::kF32, {12, 20}));
    b.output(b.op(OpKind::kGroupedMm, in, {{"w_layout", int64_t{1}}}));
    ValueId g = b.input(DType::kF32, {2 * n, 20});
    b.output(b.op(OpKind::kGroupedMmWgrad, {g, af, offs}));
  });
  return cases;
}

}  // namespace dg
