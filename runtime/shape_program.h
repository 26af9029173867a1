// A flat host-side program that evaluates a fixed list of symbolic expressions (output shapes,
// workspace offsets, grids) from symbol values, without walking expression trees at call time.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/sym_expr.h"

namespace dg {

class ShapeProgram {
 public:
  ShapeProgram() = default;
  // `symbols` fixes the order of symbol values passed to run(); every symbol in `exprs` must be
  // among them (throws std::invalid_argument otherwise).
  static ShapeProgram compile(const std::vector<SymExpr>& symbols,
                              const std::vector<SymExpr>& exprs);
  // Writes exprs[i] to results[i]; false on overflow or division by zero.
  bool run(const int64_t* symbol_values, int64_t* results) const;
  size_t num_results() const { return result_regs_.size(); }
  size_t num_instructions() const { return code_.size(); }

  enum Op : uint8_t { kConst, kSymbol, kAdd, kMul, kFloorDiv, kMod, kMax, kMin };
  struct Instr {
    Op op;
    int32_t dst, a, b;
    int64_t imm;  // kConst: the value; kSymbol: the symbol's position
  };

 private:
  std::vector<Instr> code_;
  std::vector<int32_t> result_regs_;
  int32_t num_regs_ = 0;
};

}  // namespace dg
