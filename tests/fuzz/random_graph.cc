#include "tests/fuzz/random_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace dg::testing {
namespace {

class RandomGraph {
 public:
  explicit RandomGraph(uint64_t seed) : rng_(seed), b_("random_" + std::to_string(seed)) {}

  Graph build(int max_nodes) {
    int n_symbols = pick(0, 3);
    for (int i = 0; i < n_symbols; ++i) {
      int64_t divisor = pick(0, 3) == 0 ? int64_t{1} << pick(1, 4) : 1;
      int64_t hi = pick(0, 1) ? Interval::kPosInf : divisor * pick(2, 4096);
      symbols_.push_back(b_.symbol("s" + std::to_string(i), divisor * pick(0, 2), hi, divisor));
    }
    int n_inputs = pick(1, 4);
    for (int i = 0; i < n_inputs; ++i) tensors_.push_back(b_.input(dtype(), shape()));
    if (!symbols_.empty() && pick(0, 2) == 0) b_.sym_input(dim());
    int count = 0;
    const OpInfo* ops = all_ops(&count);
    for (int tries = 0; tries < 8 * max_nodes && nodes_ < max_nodes; ++tries) {
      const OpInfo& op = ops[pick(0, count - 1)];
      int n_in = op.max_inputs < 0 ? pick(op.min_inputs, op.min_inputs + 2)
                                   : pick(op.min_inputs, op.max_inputs);
      std::vector<ValueId> in;
      for (int i = 0; i < n_in; ++i) in.push_back(tensors_[pick(0, tensors_.size() - 1)]);
      try {
        tensors_.push_back(b_.op(op.kind, in, attrs(in)));
        ++nodes_;
      } catch (const std::invalid_argument&) {
        // Not a valid application: draw another.
      }
    }
    int n_out = pick(1, 3);
    for (int i = 0; i < n_out; ++i) b_.output(tensors_[pick(0, tensors_.size() - 1)]);
    return b_.finish();
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int pick(int lo, size_t hi) { return pick(lo, static_cast<int>(hi)); }

  DType dtype() {
    static const DType kAll[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF64,
                                 DType::kI64, DType::kI32,  DType::kBool};
    return kAll[pick(0, 6)];
  }

  SymExpr dim() {
    if (symbols_.empty() || pick(0, 2) == 0) return SymExpr(pick(1, 8));
    SymExpr s = symbols_[pick(0, symbols_.size() - 1)];
    switch (pick(0, 3)) {
      case 0:
        return s + pick(1, 3);
      case 1:
        return pick(2, 4) * s;
      default:
        return s;
    }
  }

  std::vector<SymExpr> shape() {
    std::vector<SymExpr> out(pick(0, 3));  // rank 0 (a scalar tensor) included
    for (SymExpr& d : out) d = dim();
    return out;
  }

  // A shape-like list: an operand's shape (as is, permuted, or extended) or a random one.
  std::vector<SymExpr> shape_like(const std::vector<ValueId>& in) {
    if (in.empty() || pick(0, 3) == 0) return shape();
    std::vector<SymExpr> s = b_.graph().tensor(in[pick(0, in.size() - 1)]).shape;
    switch (pick(0, 3)) {
      case 0:
        std::shuffle(s.begin(), s.end(), rng_);
        break;
      case 1:
        s.insert(s.begin(), dim());
        break;
      case 2: {  // flattened
        SymExpr n = 1;
        for (const SymExpr& d : s) n = n * d;
        s = {n};
        break;
      }
      default:
        break;
    }
    return s;
  }

  std::vector<int64_t> axes(const std::vector<ValueId>& in) {
    int rank = in.empty() ? 2 : b_.graph().tensor(in[0]).rank();
    std::vector<int64_t> out;
    for (int a = 0; a < rank; ++a) out.push_back(pick(0, 1) ? a : a - rank);
    std::shuffle(out.begin(), out.end(), rng_);
    if (pick(0, 1)) out.resize(pick(0, out.size()));  // a subset, possibly empty
    return out;
  }

  double value() {
    static const double kSpecial[] = {0.0,
                                      -0.0,
                                      1.0,
                                      -1.5,
                                      1e-5,
                                      3.0,
                                      std::numeric_limits<double>::infinity(),
                                      -std::numeric_limits<double>::infinity(),
                                      std::numeric_limits<double>::quiet_NaN()};
    return kSpecial[pick(0, 8)];
  }

  // Each attribute name an op of the catalog reads, given a value of a kind that usually fits;
  // a few are left out or given another kind, so rejections are drawn too.
  Attrs attrs(const std::vector<ValueId>& in) {
    Attrs a;
    if (pick(0, 1)) a.set("dtype", dtype());
    if (pick(0, 1)) {
      if (pick(0, 3) == 0)
        a.set("shape", std::vector<int64_t>{});
      else
        a.set("shape", shape_like(in));
    }
    if (pick(0, 1)) a.set("dims", axes(in));
    if (pick(0, 2) == 0) a.set("keepdim", int64_t{pick(0, 1)});
    if (pick(0, 1)) a.set("dim", int64_t{pick(-2, 2)});
    if (pick(0, 1)) {
      if (pick(0, 3) == 0 && !symbols_.empty())
        a.set("value", std::vector<SymExpr>{dim()});
      else
        a.set("value", value());
    }
    if (pick(0, 2) == 0) {
      a.set("start", std::vector<SymExpr>{SymExpr(pick(0, 1))});
      SymExpr end = in.empty() || b_.graph().tensor(in[0]).rank() == 0
                        ? SymExpr(1)
                        : b_.graph().tensor(in[0]).shape[0];
      a.set("end", std::vector<SymExpr>{end});
      if (pick(0, 1)) a.set("step", int64_t{pick(1, 3)});
    }
    return a;
  }

  std::mt19937_64 rng_;
  GraphBuilder b_;
  std::vector<SymExpr> symbols_;
  std::vector<ValueId> tensors_;
  int nodes_ = 0;
};

}  // namespace

Graph random_graph(uint64_t seed, int max_nodes) { return RandomGraph(seed).build(max_nodes); }

}  // namespace dg::testing
