#include "runtime/shape_program.h"

#include <map>
#include <stdexcept>

#include "ir/sym_node.h"

namespace dg {

namespace {
class Assembler {
 public:
  Assembler(const std::vector<SymExpr>& symbols) : symbols_(symbols) {}

  using Op = ShapeProgram::Op;
  using Instr = ShapeProgram::Instr;

  int32_t emit(const SymNode* n, std::vector<Instr>& code) {
    auto it = reg_of_.find(n);
    if (it != reg_of_.end()) return it->second;
    auto put = [&](Op op, int32_t a, int32_t b, int64_t imm) {
      code.push_back(Instr{op, next_reg_, a, b, imm});
      return next_reg_++;
    };
    auto rec = [&](const SymNode* c) { return emit(c, code); };
    int32_t r = -1;
    switch (n->kind) {
      case SymKind::kConst:
        r = put(ShapeProgram::kConst, 0, 0, n->value);
        break;
      case SymKind::kSymbol: {
        int64_t pos = -1;
        for (size_t i = 0; i < symbols_.size(); ++i)
          if (symbols_[i].node() == n) pos = static_cast<int64_t>(i);
        if (pos < 0) throw std::invalid_argument("shape program: unknown symbol " + n->name);
        r = put(ShapeProgram::kSymbol, 0, 0, pos);
        break;
      }
      case SymKind::kSum: {
        r = rec(intern_const(n->value));
        for (auto& [coef, mono] : n->terms) {
          int32_t t = rec(mono);
          if (coef != 1) t = put(ShapeProgram::kMul, t, rec(intern_const(coef)), 0);
          r = put(ShapeProgram::kAdd, r, t, 0);
        }
        break;
      }
      case SymKind::kProduct: {
        r = rec(n->factors[0]);
        for (size_t i = 1; i < n->factors.size(); ++i)
          r = put(ShapeProgram::kMul, r, rec(n->factors[i]), 0);
        break;
      }
      default: {
        int32_t a = rec(n->lhs), b = rec(n->rhs);
        Op op = n->kind == SymKind::kFloorDiv ? ShapeProgram::kFloorDiv
                : n->kind == SymKind::kMod    ? ShapeProgram::kMod
                : n->kind == SymKind::kMax    ? ShapeProgram::kMax
                                              : ShapeProgram::kMin;
        r = put(op, a, b, 0);
      }
    }
    reg_of_[n] = r;
    return r;
  }
  int32_t num_regs() const { return next_reg_; }

 private:
  const std::vector<SymExpr>& symbols_;
  std::map<const SymNode*, int32_t> reg_of_;  // common subexpressions share a register
  int32_t next_reg_ = 0;
};
}  // namespace

ShapeProgram ShapeProgram::compile(const std::vector<SymExpr>& symbols,
                                   const std::vector<SymExpr>& exprs) {
  ShapeProgram p;
  Assembler as(symbols);
  for (const SymExpr& e : exprs) p.result_regs_.push_back(as.emit(e.node(), p.code_));
  p.num_regs_ = as.num_regs();
  return p;
}

bool ShapeProgram::run(const int64_t* symbol_values, int64_t* results) const {
  // Small programs use the stack; registers are written before they are read.
  int64_t stack_regs[256];
  std::vector<int64_t> heap_regs;
  int64_t* reg = stack_regs;
  if (num_regs_ > 256) {
    heap_regs.resize(num_regs_);
    reg = heap_regs.data();
  }
  for (const Instr& in : code_) {
    int64_t a = reg[in.a], b = reg[in.b], r = 0;
    switch (in.op) {
      case kConst:
        r = in.imm;
        break;
      case kSymbol:
        r = symbol_values[in.imm];
        break;
      case kAdd:
        if (__builtin_add_overflow(a, b, &r)) return false;
        break;
      case kMul:
        if (__builtin_mul_overflow(a, b, &r)) return false;
        break;
      case kFloorDiv:
      case kMod: {
        if (b == 0 || (a == INT64_MIN && b == -1)) return false;
        int64_t q = a / b;
        if (a % b != 0 && ((a < 0) != (b < 0))) --q;
        r = in.op == kFloorDiv ? q : a - q * b;
        break;
      }
      case kMax:
        r = a > b ? a : b;
        break;
      case kMin:
        r = a < b ? a : b;
        break;
    }
    reg[in.dst] = r;
  }
  for (size_t i = 0; i < result_regs_.size(); ++i) results[i] = reg[result_regs_[i]];
  return true;
}

}  // namespace dg
