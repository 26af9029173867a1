// Internal node representation behind SymExpr (see Note [SymExpr canonical form]).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ir/sym_expr.h"

namespace dg {

enum class SymKind : uint8_t { kConst, kSymbol, kSum, kProduct, kFloorDiv, kMod, kMax, kMin };

struct SymNode {
  SymKind kind;
  int64_t value = 0;                                      // kConst: value; kSum: constant term
  std::string name;                                       // kSymbol
  Interval range;                                         // kSymbol
  int64_t divisor = 1;                                    // kSymbol
  std::vector<std::pair<int64_t, const SymNode*>> terms;  // kSum: (coefficient, monomial), sorted
  std::vector<const SymNode*> factors;                    // kProduct: sorted atoms, size >= 2
  const SymNode* lhs = nullptr;                           // kFloorDiv, kMod, kMax, kMin
  const SymNode* rhs = nullptr;
};

// Interning constructors: structurally equal arguments return the same node. Callers pass
// operands already in canonical form.
const SymNode* intern_const(int64_t value);
const SymNode* intern_symbol(const std::string& name, Interval range, int64_t divisor);
const SymNode* intern_sum(std::vector<std::pair<int64_t, const SymNode*>> terms, int64_t constant);
const SymNode* intern_product(std::vector<const SymNode*> factors);  // returns the atom if size 1
const SymNode* intern_binary(SymKind kind, const SymNode* lhs, const SymNode* rhs);

}  // namespace dg
