// Symbolic expressions in the text form (shapes, symbol bounds, attribute values), read from a
// Cursor over the symbols declared so far (ir/text_parser.cc).
#pragma once
#include <functional>
#include <map>
#include <string>

#include "ir/sym_expr.h"
#include "ir/text_cursor.h"

namespace dg::text_parse {

using SymbolTable = std::map<std::string, SymExpr, std::less<>>;

// An expression at the cursor; SyntaxError when it is malformed, names an undeclared symbol, or
// exceeds the parser's limits on depth, operators and size (Note [Text parser robustness]).
SymExpr parse_expr(Cursor& c, const SymbolTable& syms);

}  // namespace dg::text_parse
