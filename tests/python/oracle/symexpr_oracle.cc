// Oracle for tests/python/test_symbolic.py: reads expressions in prefix form, one per line, builds
// them with the C++ SymExpr constructors and prints `to_string() | lo hi | divisor` per line.
//   (add A B) (sub A B) (mul A B) (floordiv A B) (mod A B) (max A B) (min A B) 7 -3 s0
// Symbols: s0 in [2, inf] div 1, s1 in [0, 40] div 1, s2 in [1, inf] div 4.
#include <iostream>
#include <sstream>
#include <string>

#include "ir/sym_expr.h"

using dg::SymExpr;

namespace {
SymExpr parse(std::istringstream& in) {
  std::string tok;
  in >> tok;
  if (tok == "(") {
    std::string op;
    in >> op;
    SymExpr a = parse(in), b = parse(in);
    in >> tok;  // ")"
    if (op == "add") return a + b;
    if (op == "sub") return a - b;
    if (op == "mul") return a * b;
    if (op == "floordiv") return dg::floordiv(a, b);
    if (op == "mod") return dg::mod(a, b);
    if (op == "max") return dg::max(a, b);
    return dg::min(a, b);
  }
  if (tok == "s0") return SymExpr::symbol("s0", 2);
  if (tok == "s1") return SymExpr::symbol("s1", 0, 40);
  if (tok == "s2") return SymExpr::symbol("s2", 1, dg::Interval::kPosInf, 4);
  return SymExpr(static_cast<int64_t>(std::stoll(tok)));
}
}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    SymExpr e = parse(in);
    dg::Interval b = e.bounds();
    std::cout << e.to_string() << " | " << b.lo << " " << b.hi << " | " << e.divisor() << "\n";
  }
  return 0;
}
