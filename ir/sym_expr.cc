#include "ir/sym_expr.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "ir/sym_node.h"

namespace dg {
namespace {

// ---- checked arithmetic -------------------------------------------------------------------------

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw std::overflow_error("symbolic dimension overflow");
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw std::overflow_error("symbolic dimension overflow");
  return r;
}
int64_t floor_div(int64_t a, int64_t b) {
  if (b == -1 && a == std::numeric_limits<int64_t>::min())  // the quotient 2^63 does not fit
    throw std::overflow_error("symbolic dimension overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) {  // without a - q * b, whose product may overflow
  if (b == -1) return 0;                   // and INT64_MIN % -1 traps
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// ---- polynomial view
// ------------------------------------------------------------------------------

struct NodeLess {
  bool operator()(const SymNode* a, const SymNode* b) const {
    return SymExpr::compare(SymExpr(a), SymExpr(b)) < 0;
  }
};

struct Poly {
  std::map<const SymNode*, int64_t, NodeLess> terms;  // monomial -> coefficient (non-zero)
  int64_t constant = 0;
};

Poly to_poly(const SymNode* n) {
  Poly p;
  if (n->kind == SymKind::kConst) {
    p.constant = n->value;
  } else if (n->kind == SymKind::kSum) {
    for (auto& [coef, mono] : n->terms) p.terms[mono] = coef;
    p.constant = n->value;
  } else {
    p.terms[n] = 1;
  }
  return p;
}

const SymNode* from_poly(const Poly& p) {
  std::vector<std::pair<int64_t, const SymNode*>> terms;
  for (auto& [mono, coef] : p.terms)
    if (coef != 0) terms.emplace_back(coef, mono);
  if (terms.empty()) return intern_const(p.constant);
  if (terms.size() == 1 && terms[0].first == 1 && p.constant == 0) return terms[0].second;
  return intern_sum(std::move(terms), p.constant);
}

void add_into(Poly& acc, const Poly& p, int64_t scale) {
  acc.constant = checked_add(acc.constant, checked_mul(scale, p.constant));
  for (auto& [mono, coef] : p.terms) {
    int64_t& slot = acc.terms[mono];
    slot = checked_add(slot, checked_mul(scale, coef));
    if (slot == 0) acc.terms.erase(mono);
  }
}

std::vector<const SymNode*> factors_of(const SymNode* mono) {
  if (mono->kind == SymKind::kProduct) return mono->factors;
  return {mono};
}

const SymNode* multiply_monomials(const SymNode* a, const SymNode* b) {
  auto fa = factors_of(a), fb = factors_of(b);
  fa.insert(fa.end(), fb.begin(), fb.end());
  std::sort(fa.begin(), fa.end(), NodeLess());
  return intern_product(std::move(fa));
}

// ---- interval arithmetic (saturating at the infinities) -------------------------------------

constexpr int64_t kNegInf = Interval::kNegInf, kPosInf = Interval::kPosInf;

// Note [Interval ends]
// kNegInf / kPosInf are INT64_MIN / INT64_MAX, so an interval end there may mean "unbounded" or be
// the finite value (a constant INT64_MIN, or max(x, INT64_MAX)). Each end is computed so that it
// is sound under both readings: a lower end saturates only down to kNegInf, an upper end only up
// to kPosInf, and otherwise the extreme is used as the finite value. `inf` names the end being
// computed by its own infinity (kNegInf for a lower end, kPosInf for an upper one).
int64_t sat_add(int64_t a, int64_t b, int64_t inf) {
  if (a == inf || b == inf) return inf;
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? kPosInf : kNegInf;
  return r;
}
int64_t sat_mul(int64_t a, int64_t b, int64_t inf) {
  if (a == 0 || b == 0) return 0;
  bool neg = (a < 0) != (b < 0);
  bool extreme = a == kNegInf || a == kPosInf || b == kNegInf || b == kPosInf;
  if (extreme && neg == (inf == kNegInf)) return inf;  // an unbounded factor may push this end out
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return neg ? kNegInf : kPosInf;
  return r;
}
// Each end sound whether it reads as unbounded or finite (Note [Interval ends]).
Interval iv_add(Interval a, Interval b) {
  return {sat_add(a.lo, b.lo, kNegInf), sat_add(a.hi, b.hi, kPosInf)};
}
Interval iv_mul(Interval a, Interval b) {
  int64_t lo[4] = {sat_mul(a.lo, b.lo, kNegInf), sat_mul(a.lo, b.hi, kNegInf),
                   sat_mul(a.hi, b.lo, kNegInf), sat_mul(a.hi, b.hi, kNegInf)};
  int64_t hi[4] = {sat_mul(a.lo, b.lo, kPosInf), sat_mul(a.lo, b.hi, kPosInf),
                   sat_mul(a.hi, b.lo, kPosInf), sat_mul(a.hi, b.hi, kPosInf)};
  return {*std::min_element(lo, lo + 4), *std::max_element(hi, hi + 4)};
}
int64_t sat_floordiv(int64_t a, int64_t c, int64_t inf) {  // c > 0
  return a == inf ? inf : floor_div(a, c);
}
// |v|, except that INT64_MIN gives 2^62, the largest int64 that divides it.
int64_t abs_divisor(int64_t v) { return v == kNegInf ? int64_t{1} << 62 : (v < 0 ? -v : v); }

Interval bounds_of(const SymNode* n) {
  switch (n->kind) {
    case SymKind::kConst:
      return {n->value, n->value};
    case SymKind::kSymbol:
      return n->range;
    case SymKind::kSum: {
      Interval r{n->value, n->value};
      for (auto& [coef, mono] : n->terms) r = iv_add(r, iv_mul({coef, coef}, bounds_of(mono)));
      return r;
    }
    case SymKind::kProduct: {
      Interval r{1, 1};
      for (auto* f : n->factors) r = iv_mul(r, bounds_of(f));
      return r;
    }
    case SymKind::kFloorDiv: {
      if (n->rhs->kind == SymKind::kConst && n->rhs->value > 0) {
        Interval a = bounds_of(n->lhs);
        return {sat_floordiv(a.lo, n->rhs->value, kNegInf),
                sat_floordiv(a.hi, n->rhs->value, kPosInf)};
      }
      return {};
    }
    case SymKind::kMod: {
      Interval b = bounds_of(n->rhs);
      if (b.lo > 0) return {0, b.hi == kPosInf ? kPosInf : b.hi - 1};
      return {};
    }
    case SymKind::kMax: {
      Interval a = bounds_of(n->lhs), b = bounds_of(n->rhs);
      return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
    case SymKind::kMin: {
      Interval a = bounds_of(n->lhs), b = bounds_of(n->rhs);
      return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    }
  }
  return {};
}

int64_t divisor_of(const SymNode* n) {
  switch (n->kind) {
    case SymKind::kConst:
      return abs_divisor(n->value);
    case SymKind::kSymbol:
      return n->divisor;
    case SymKind::kProduct: {
      int64_t d = 1;
      for (auto* f : n->factors) d = sat_mul(d, divisor_of(f), kPosInf);
      return d == kPosInf ? 1 : d;
    }
    case SymKind::kSum: {
      int64_t g = abs_divisor(n->value);
      for (auto& [coef, mono] : n->terms) {
        int64_t t = sat_mul(abs_divisor(coef), divisor_of(mono), kPosInf);
        g = std::gcd(g, t == kPosInf ? 1 : t);
      }
      return g;
    }
    default:
      return 1;
  }
}

const SymNode* binary_atom(SymKind kind, const SymNode* a, const SymNode* b) {
  return intern_binary(kind, a, b);
}

}  // namespace

// ---- SymExpr ----------------------------------------------------------------------------------

SymExpr::SymExpr() : node_(intern_const(0)) {}
SymExpr::SymExpr(int64_t value) : node_(intern_const(value)) {}

SymExpr SymExpr::symbol(const std::string& name, int64_t lo, int64_t hi, int64_t divisor) {
  if (lo > hi) throw std::invalid_argument("symbol " + name + " has an empty range");
  if (divisor < 1) throw std::invalid_argument("symbol " + name + " has a divisor below 1");
  if (lo == hi) return SymExpr(lo);  // a symbol with one possible value is that value
  return SymExpr(intern_symbol(name, {lo, hi}, divisor));
}

SymExpr operator+(const SymExpr& a, const SymExpr& b) {
  Poly p = to_poly(a.node());
  add_into(p, to_poly(b.node()), 1);
  return SymExpr(from_poly(p));
}
SymExpr operator-(const SymExpr& a, const SymExpr& b) {
  Poly p = to_poly(a.node());
  add_into(p, to_poly(b.node()), -1);
  return SymExpr(from_poly(p));
}
SymExpr SymExpr::operator-() const { return SymExpr(0) - *this; }

SymExpr operator*(const SymExpr& a, const SymExpr& b) {
  Poly pa = to_poly(a.node()), pb = to_poly(b.node()), out;
  out.constant = checked_mul(pa.constant, pb.constant);
  auto add_term = [&](const SymNode* mono, int64_t coef) {
    if (coef == 0) return;
    int64_t& slot = out.terms[mono];
    slot = checked_add(slot, coef);
    if (slot == 0) out.terms.erase(mono);
  };
  for (auto& [ma, ca] : pa.terms) {
    add_term(ma, checked_mul(ca, pb.constant));
    for (auto& [mb, cb] : pb.terms) add_term(multiply_monomials(ma, mb), checked_mul(ca, cb));
  }
  for (auto& [mb, cb] : pb.terms) add_term(mb, checked_mul(cb, pa.constant));
  return SymExpr(from_poly(out));
}

bool SymExpr::is_const() const { return node_->kind == SymKind::kConst; }
std::optional<int64_t> SymExpr::as_const() const {
  if (is_const()) return node_->value;
  return std::nullopt;
}
bool SymExpr::is_symbol() const { return node_->kind == SymKind::kSymbol; }
const std::string& SymExpr::symbol_name() const { return node_->name; }
Interval SymExpr::symbol_range() const { return node_->range; }
int64_t SymExpr::symbol_divisor() const { return node_->divisor; }
Interval SymExpr::bounds() const { return bounds_of(node_); }
int64_t SymExpr::divisor() const { return divisor_of(node_); }

std::vector<SymExpr> SymExpr::free_symbols() const {
  std::vector<SymExpr> out;
  std::function<void(const SymNode*)> walk = [&](const SymNode* n) {
    switch (n->kind) {
      case SymKind::kConst:
        break;
      case SymKind::kSymbol:
        if (std::find(out.begin(), out.end(), SymExpr(n)) == out.end()) out.push_back(SymExpr(n));
        break;
      case SymKind::kSum:
        for (auto& t : n->terms) walk(t.second);
        break;
      case SymKind::kProduct:
        for (auto* f : n->factors) walk(f);
        break;
      default:
        walk(n->lhs);
        walk(n->rhs);
    }
  };
  walk(node_);
  return out;
}

// ---- floordiv / mod / max / min -----------------------------------------------------------------

SymExpr floordiv(const SymExpr& a, const SymExpr& b) {
  auto cb = b.as_const();
  if (cb && *cb == 0) throw std::domain_error("symbolic division by zero");
  if (cb && *cb == 1) return a;
  if (auto ca = a.as_const(); ca && cb) return SymExpr(floor_div(*ca, *cb));
  if (a.is_const() && *a.as_const() == 0) return a;
  if (!cb || *cb < 0) {
    if (a == b && b.bounds().lo > 0) return SymExpr(1);
    return SymExpr(binary_atom(SymKind::kFloorDiv, a.node(), b.node()));
  }
  int64_t c = *cb;
  // floor((c*X + Y) / c) = X + floor(Y / c) for integer X: pull out the exactly divisible part.
  Poly p = to_poly(a.node()), whole, rest;
  whole.constant = floor_div(p.constant, c);
  rest.constant = floor_mod(p.constant, c);
  for (auto& [mono, coef] : p.terms) {
    if (coef % c == 0)
      whole.terms[mono] = coef / c;
    else
      rest.terms[mono] = coef;
  }
  SymExpr x(from_poly(whole)), y(from_poly(rest));
  Interval iy = y.bounds();
  if (iy.lo != kNegInf && iy.hi != kPosInf && floor_div(iy.lo, c) == floor_div(iy.hi, c))
    return x + SymExpr(floor_div(iy.lo, c));
  // floordiv(floordiv(z, c2), c) = floordiv(z, c2 * c) for positive c2, c.
  if (y.node()->kind == SymKind::kFloorDiv && y.node()->rhs->kind == SymKind::kConst &&
      y.node()->rhs->value > 0)
    return x + floordiv(SymExpr(y.node()->lhs), SymExpr(checked_mul(y.node()->rhs->value, c)));
  return x + SymExpr(binary_atom(SymKind::kFloorDiv, y.node(), b.node()));
}

SymExpr mod(const SymExpr& a, const SymExpr& b) {
  auto cb = b.as_const();
  if (cb && *cb == 0) throw std::domain_error("symbolic modulo by zero");
  if (cb && (*cb == 1 || *cb == -1)) return SymExpr(0);
  if (auto ca = a.as_const(); ca && cb) return SymExpr(floor_mod(*ca, *cb));
  if (!cb || *cb < 0) {
    if (a == b) return SymExpr(0);
    return SymExpr(binary_atom(SymKind::kMod, a.node(), b.node()));
  }
  int64_t c = *cb;
  Poly p = to_poly(a.node()), rest;
  rest.constant = floor_mod(p.constant, c);
  for (auto& [mono, coef] : p.terms)
    if (coef % c != 0) rest.terms[mono] = coef;
  SymExpr y(from_poly(rest));
  int64_t d = y.divisor();
  if (d != 0 && d % c == 0) return SymExpr(0);
  if (d == 0) return SymExpr(0);
  Interval iy = y.bounds();
  if (iy.lo != kNegInf && iy.hi != kPosInf && floor_div(iy.lo, c) == floor_div(iy.hi, c))
    return y - SymExpr(checked_mul(floor_div(iy.lo, c), c));
  return SymExpr(binary_atom(SymKind::kMod, y.node(), b.node()));
}

namespace {
SymExpr min_max(SymKind kind, const SymExpr& a, const SymExpr& b) {
  if (a == b) return a;
  bool want_max = kind == SymKind::kMax;
  if (provably_ge(a, b)) return want_max ? a : b;
  if (provably_ge(b, a)) return want_max ? b : a;
  // Commutative: order the operands structurally.
  if (SymExpr::compare(a, b) <= 0) return SymExpr(binary_atom(kind, a.node(), b.node()));
  return SymExpr(binary_atom(kind, b.node(), a.node()));
}
}  // namespace

SymExpr max(const SymExpr& a, const SymExpr& b) { return min_max(SymKind::kMax, a, b); }
SymExpr min(const SymExpr& a, const SymExpr& b) { return min_max(SymKind::kMin, a, b); }
SymExpr ceildiv(const SymExpr& a, const SymExpr& b) { return floordiv(a + b - SymExpr(1), b); }

bool provably_ge(const SymExpr& a, const SymExpr& b) {
  try {
    return (a - b).bounds().lo >= 0;
  } catch (const std::overflow_error&) {
    return false;
  }
}
bool provably_eq(const SymExpr& a, const SymExpr& b) { return a == b; }

}  // namespace dg
