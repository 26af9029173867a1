#include "ir/text_expr_parser.h"

#include <string>

#include "ir/sym_node.h"

namespace dg::text_parse {
namespace {

constexpr int kMaxExprDepth = 64;
constexpr int kMaxExprOps = 4096;     // operators in one expression
constexpr size_t kMaxExprSize = 256;  // terms + factors of any intermediate canonical form

// Symbolic expressions: sum := term (('+' | '-') term)*, term := unary ('*' unary)*,
// unary := '-' unary | integer | primary, primary := symbol | '(' sum ')' | fn '(' sum ',' sum ')'.
// A '-' is pushed down to the first factor, so that negated literals may reach INT64_MIN.
// Products of sums expand, so the size of every intermediate result is bounded.
class ExprParser {
 public:
  ExprParser(Cursor& c, const SymbolTable& syms) : c_(c), syms_(syms) {}

  SymExpr sum(int depth) {
    SymExpr r = term(depth, false);
    for (;;) {
      if (c_.accept('+'))
        r = bounded(r + term(depth, false));
      else if (c_.accept('-'))
        r = bounded(r + term(depth, true));
      else
        return r;
    }
  }

 private:
  void deeper(int depth) {
    if (depth > kMaxExprDepth)
      fail("expression nested deeper than " + std::to_string(kMaxExprDepth) + " levels");
  }
  SymExpr bounded(SymExpr e) {
    if (++ops_ > kMaxExprOps)
      fail("expression has more than " + std::to_string(kMaxExprOps) + " operators");
    const SymNode* n = e.node();
    size_t size = 1;
    for (auto& [coef, mono] : n->terms)
      size += 1 + (mono->kind == SymKind::kProduct ? mono->factors.size() : 0);
    size += n->factors.size();
    if (size > kMaxExprSize)
      fail("expression grows past " + std::to_string(kMaxExprSize) + " terms and factors");
    return e;
  }
  SymExpr term(int depth, bool negate) {
    SymExpr r = unary(depth, negate);
    while (c_.accept('*')) r = bounded(r * unary(depth, false));
    return r;
  }
  SymExpr unary(int depth, bool negate) {
    if (c_.accept('-')) {
      deeper(depth + 1);
      return unary(depth + 1, !negate);
    }
    c_.skip_ws();
    if (is_digit(c_.peek_raw())) return SymExpr(c_.integer(negate));
    SymExpr p = primary(depth);
    return negate ? -p : p;
  }
  SymExpr primary(int depth) {
    if (c_.accept('(')) {
      deeper(depth + 1);
      SymExpr r = sum(depth + 1);
      c_.expect(')', "to close '('");
      return r;
    }
    std::string name = c_.ident("an expression");
    if (c_.accept('(')) {
      deeper(depth + 1);
      using Fn = SymExpr (*)(const SymExpr&, const SymExpr&);
      static const std::map<std::string, Fn, std::less<>> kFns = {
          {"floordiv", floordiv}, {"mod", mod}, {"max", max}, {"min", min}};
      auto fn = kFns.find(name);
      if (fn == kFns.end()) fail("unknown function '" + name + "'");
      SymExpr a = sum(depth + 1);
      c_.expect(',', "between the arguments of " + name);
      SymExpr b = sum(depth + 1);
      c_.expect(')', "to close " + name + "(");
      if ((fn->second == floordiv || fn->second == mod) && b == SymExpr(0)) fail(name + " by zero");
      return bounded(fn->second(a, b));
    }
    auto it = syms_.find(name);
    if (it == syms_.end()) fail("undeclared symbol '" + name + "' (declare it with a sym line)");
    return it->second;
  }

  Cursor& c_;
  const SymbolTable& syms_;
  int ops_ = 0;
};

}  // namespace

SymExpr parse_expr(Cursor& c, const SymbolTable& syms) { return ExprParser(c, syms).sum(0); }

}  // namespace dg::text_parse
