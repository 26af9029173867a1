// One small graph per op of the catalog, with a symbolic dim, for the codegen tests.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dg {

struct OpCase {
  std::string name;  // the op's name, plus a variant tag where an op has several cases
  OpKind op;
  Graph graph;  // symbol "n" is the dynamic extent
};

std::vector<OpCase> all_op_cases();

// GoogleTest prints a parameter with this instead of its bytes.
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

}  // namespace dg
