// Symbolic integer expressions for tensor dimensions.
//
// Note [SymExpr canonical form]
// Every SymExpr is built by the constructors below, which return one canonical form:
//   sum of (coefficient * monomial) + constant
// where a monomial is a sorted product of atoms, and an atom is a symbol or an opaque
// floordiv / mod / max / min node whose operands are themselves canonical. Nodes are interned,
// so two expressions are equal exactly when their handles point at the same node. Symbols carry
// their facts (a closed range and a divisor) as part of their identity; simplification uses those
// facts (e.g. floordiv(s, 16) with s in [0, 15] is 0). Division and modulo use floor semantics.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dg {

struct SymNode;

// Closed interval; kNegInf / kPosInf stand for unbounded ends.
struct Interval {
  static constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();
  int64_t lo = kNegInf;
  int64_t hi = kPosInf;
  bool contains(int64_t v) const { return lo <= v && v <= hi; }
  bool is_const() const { return lo == hi; }
};

class SymExpr {
 public:
  SymExpr();               // the constant 0
  SymExpr(int64_t value);  // NOLINT: constants convert implicitly so `2 * s + 1` reads naturally
  SymExpr(int value) : SymExpr(static_cast<int64_t>(value)) {}  // NOLINT

  // A symbol with facts: value in [lo, hi] and a multiple of `divisor` (>= 1).
  static SymExpr symbol(const std::string& name, int64_t lo = 0, int64_t hi = Interval::kPosInf,
                        int64_t divisor = 1);

  friend SymExpr operator+(const SymExpr& a, const SymExpr& b);
  friend SymExpr operator-(const SymExpr& a, const SymExpr& b);
  friend SymExpr operator*(const SymExpr& a, const SymExpr& b);
  SymExpr operator-() const;
  friend bool operator==(const SymExpr& a, const SymExpr& b) { return a.node_ == b.node_; }
  friend bool operator!=(const SymExpr& a, const SymExpr& b) { return a.node_ != b.node_; }

  bool is_const() const;
  std::optional<int64_t> as_const() const;
  bool is_symbol() const;
  // Name and facts; only valid when is_symbol().
  const std::string& symbol_name() const;
  Interval symbol_range() const;
  int64_t symbol_divisor() const;

  // All symbols occurring in the expression, in a deterministic order.
  std::vector<SymExpr> free_symbols() const;
  // Sound bounds from the symbols' facts.
  Interval bounds() const;
  // Largest d known to divide every value of the expression (0 for the constant 0).
  int64_t divisor() const;

  // Evaluates under a binding from symbol name to value; nullopt if a symbol is unbound, a
  // divisor is zero or arithmetic overflows.
  std::optional<int64_t> evaluate(
      const std::function<std::optional<int64_t>(const SymExpr&)>& bind) const;
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t>& bind) const;

  // Rebuilds the expression with each symbol replaced (canonicalizes the result).
  SymExpr substitute(const std::function<SymExpr(const SymExpr&)>& replace) const;

  std::string to_string() const;
  const SymNode* node() const { return node_; }
  // Structural total order, independent of creation order (used to sort terms and for printing).
  static int compare(const SymExpr& a, const SymExpr& b);

  explicit SymExpr(const SymNode* node) : node_(node) {}

 private:
  const SymNode* node_;
};

SymExpr floordiv(const SymExpr& a, const SymExpr& b);
SymExpr mod(const SymExpr& a, const SymExpr& b);
SymExpr max(const SymExpr& a, const SymExpr& b);
SymExpr min(const SymExpr& a, const SymExpr& b);
// ceil(a / b) for b > 0, as floordiv(a + b - 1, b).
SymExpr ceildiv(const SymExpr& a, const SymExpr& b);

// Proves facts from bounds; false means "not proven".
bool provably_ge(const SymExpr& a, const SymExpr& b);
bool provably_eq(const SymExpr& a, const SymExpr& b);

}  // namespace dg
