// The per-op case table of ops_test (split over two files by op category).
#pragma once
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "ref_test_util.h"

namespace dg::testing {

struct OpCase {
  OpKind op;
  std::string label;
  std::function<void()> body;
};

// Names a case in gtest's messages (instead of dumping its bytes).
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << op_name(c.op) << "/" << c.label; }

inline std::vector<SymExpr> sd(const Dims& d) { return std::vector<SymExpr>(d.begin(), d.end()); }

// A graph with static inputs of the given types feeding one op.
inline Graph one_op(OpKind op, const std::vector<std::pair<DType, Dims>>& ins, Attrs attrs = {}) {
  GraphBuilder b("case");
  std::vector<ValueId> ids;
  for (auto& [dtype, shape] : ins) ids.push_back(b.input(dtype, sd(shape)));
  b.output(b.op(op, ids, std::move(attrs)));
  return b.finish();
}

// Linear, matmul, reductions, layout and index ops (ops_cases.cc).
void add_structural_cases(std::vector<OpCase>& cases);
// cumsum, index_copy, gather, scatter, sym_constant and sinc at 0 (ops_cases_thunder_coverage.cc).
void add_thunder_coverage_cases(std::vector<OpCase>& cases);
// expert_offsets, expert_order, grouped_mm and grouped_mm_wgrad (ops_cases_grouped.cc).
void add_grouped_cases(std::vector<OpCase>& cases);

}  // namespace dg::testing
