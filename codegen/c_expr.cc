#include "codegen/c_expr.h"

#include <cmath>

#include "ir/sym_node.h"
#include "ir/text_format.h"

namespace dg {

std::string symbol_param(const SymExpr& symbol) { return "S_" + symbol.symbol_name(); }

namespace {
std::string literal(int64_t v) { return "(" + std::to_string(v) + "LL)"; }

std::string emit(const SymNode* n) {
  switch (n->kind) {
    case SymKind::kConst:
      return literal(n->value);
    case SymKind::kSymbol:
      return symbol_param(SymExpr(n));
    case SymKind::kSum: {
      std::string s = "(" + literal(n->value);
      for (auto& [coef, mono] : n->terms) s += " + " + literal(coef) + " * " + emit(mono);
      return s + ")";
    }
    case SymKind::kProduct: {
      std::string s = "(";
      for (size_t i = 0; i < n->factors.size(); ++i) s += (i ? " * " : "") + emit(n->factors[i]);
      return s + ")";
    }
    case SymKind::kFloorDiv:
      return "dg_floordiv(" + emit(n->lhs) + ", " + emit(n->rhs) + ")";
    case SymKind::kMod:
      return "dg_mod(" + emit(n->lhs) + ", " + emit(n->rhs) + ")";
    case SymKind::kMax:
      return "dg_max_ll(" + emit(n->lhs) + ", " + emit(n->rhs) + ")";
    case SymKind::kMin:
      return "dg_min_ll(" + emit(n->lhs) + ", " + emit(n->rhs) + ")";
  }
  return "0";
}
}  // namespace

std::string c_expr(const SymExpr& e) {
  if (auto c = e.as_const()) return literal(*c);
  if (e.is_symbol()) return symbol_param(e);
  return emit(e.node());
}

std::string c_float(double v, const std::string& type) {
  std::string t = "((" + type + ")";
  if (std::isnan(v)) return t + "(0.0 / 0.0))";
  if (std::isinf(v)) return t + (v > 0 ? "(1.0 / 0.0))" : "(-1.0 / 0.0))");
  return t + print_float(v) + ")";
}

}  // namespace dg
