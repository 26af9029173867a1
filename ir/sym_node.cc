// Interning, structural order, evaluation, substitution and printing of SymExpr nodes.
#include "ir/sym_node.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace dg {
namespace {

// Note [SymExpr interning]
// Nodes live for the whole process in one table keyed by their structure; children are already
// interned, so their addresses are part of the key. Nodes are never freed: a process sees a few
// thousand distinct shape expressions at most.
struct InternTable {
  std::mutex mu;
  std::unordered_map<std::string, const SymNode*> by_key;
  std::deque<SymNode> storage;
};

InternTable& table() {
  static InternTable* t = new InternTable();
  return *t;
}

std::string key_of(const SymNode& n) {
  std::string k;
  auto put = [&](const void* p, size_t size) { k.append(static_cast<const char*>(p), size); };
  put(&n.kind, sizeof(n.kind));
  put(&n.value, sizeof(n.value));
  put(&n.range, sizeof(n.range));
  put(&n.divisor, sizeof(n.divisor));
  for (auto& [c, m] : n.terms) {
    put(&c, sizeof(c));
    put(&m, sizeof(m));
  }
  for (auto* f : n.factors) put(&f, sizeof(f));
  put(&n.lhs, sizeof(n.lhs));
  put(&n.rhs, sizeof(n.rhs));
  k += n.name;
  return k;
}

const SymNode* intern(SymNode n) {
  auto& t = table();
  std::string key = key_of(n);
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.by_key.find(key);
  if (it != t.by_key.end()) return it->second;
  t.storage.push_back(std::move(n));
  const SymNode* p = &t.storage.back();
  t.by_key.emplace(std::move(key), p);
  return p;
}

int cmp_int(int64_t a, int64_t b) { return a < b ? -1 : (a > b ? 1 : 0); }

int compare_nodes(const SymNode* a, const SymNode* b) {
  if (a == b) return 0;
  if (a->kind != b->kind) return cmp_int(int(a->kind), int(b->kind));
  switch (a->kind) {
    case SymKind::kConst:
      return cmp_int(a->value, b->value);
    case SymKind::kSymbol:
      if (int c = a->name.compare(b->name)) return c < 0 ? -1 : 1;
      if (int c = cmp_int(a->range.lo, b->range.lo)) return c;
      if (int c = cmp_int(a->range.hi, b->range.hi)) return c;
      return cmp_int(a->divisor, b->divisor);
    case SymKind::kSum: {
      size_t n = std::min(a->terms.size(), b->terms.size());
      for (size_t i = 0; i < n; ++i) {
        if (int c = compare_nodes(a->terms[i].second, b->terms[i].second)) return c;
        if (int c = cmp_int(a->terms[i].first, b->terms[i].first)) return c;
      }
      if (int c = cmp_int(a->terms.size(), b->terms.size())) return c;
      return cmp_int(a->value, b->value);
    }
    case SymKind::kProduct: {
      size_t n = std::min(a->factors.size(), b->factors.size());
      for (size_t i = 0; i < n; ++i)
        if (int c = compare_nodes(a->factors[i], b->factors[i])) return c;
      return cmp_int(a->factors.size(), b->factors.size());
    }
    default:
      if (int c = compare_nodes(a->lhs, b->lhs)) return c;
      return compare_nodes(a->rhs, b->rhs);
  }
}

}  // namespace

const SymNode* intern_const(int64_t value) {
  SymNode n;
  n.kind = SymKind::kConst;
  n.value = value;
  return intern(std::move(n));
}

const SymNode* intern_symbol(const std::string& name, Interval range, int64_t divisor) {
  SymNode n;
  n.kind = SymKind::kSymbol;
  n.name = name;
  n.range = range;
  n.divisor = divisor;
  return intern(std::move(n));
}

const SymNode* intern_sum(std::vector<std::pair<int64_t, const SymNode*>> terms, int64_t constant) {
  std::sort(terms.begin(), terms.end(),
            [](auto& x, auto& y) { return compare_nodes(x.second, y.second) < 0; });
  SymNode n;
  n.kind = SymKind::kSum;
  n.terms = std::move(terms);
  n.value = constant;
  return intern(std::move(n));
}

const SymNode* intern_product(std::vector<const SymNode*> factors) {
  if (factors.size() == 1) return factors[0];
  std::sort(factors.begin(), factors.end(),
            [](auto* x, auto* y) { return compare_nodes(x, y) < 0; });
  SymNode n;
  n.kind = SymKind::kProduct;
  n.factors = std::move(factors);
  return intern(std::move(n));
}

const SymNode* intern_binary(SymKind kind, const SymNode* lhs, const SymNode* rhs) {
  SymNode n;
  n.kind = kind;
  n.lhs = lhs;
  n.rhs = rhs;
  return intern(std::move(n));
}

int SymExpr::compare(const SymExpr& a, const SymExpr& b) {
  return compare_nodes(a.node(), b.node());
}

// ---- evaluation ---------------------------------------------------------------------------------

namespace {
using Binder = std::function<std::optional<int64_t>(const SymExpr&)>;

std::optional<int64_t> eval(const SymNode* n, const Binder& bind) {
  auto add = [](std::optional<int64_t> a, std::optional<int64_t> b) -> std::optional<int64_t> {
    int64_t r;
    if (!a || !b || __builtin_add_overflow(*a, *b, &r)) return std::nullopt;
    return r;
  };
  auto mul = [](std::optional<int64_t> a, std::optional<int64_t> b) -> std::optional<int64_t> {
    int64_t r;
    if (!a || !b || __builtin_mul_overflow(*a, *b, &r)) return std::nullopt;
    return r;
  };
  switch (n->kind) {
    case SymKind::kConst:
      return n->value;
    case SymKind::kSymbol:
      return bind(SymExpr(n));
    case SymKind::kSum: {
      std::optional<int64_t> r = n->value;
      for (auto& [c, m] : n->terms) r = add(r, mul(c, eval(m, bind)));
      return r;
    }
    case SymKind::kProduct: {
      std::optional<int64_t> r = 1;
      for (auto* f : n->factors) r = mul(r, eval(f, bind));
      return r;
    }
    default: {
      auto a = eval(n->lhs, bind), b = eval(n->rhs, bind);
      if (!a || !b) return std::nullopt;
      switch (n->kind) {
        case SymKind::kMax:
          return std::max(*a, *b);
        case SymKind::kMin:
          return std::min(*a, *b);
        default:
          break;
      }
      if (*b == 0) return std::nullopt;
      if (*b == -1) {  // INT64_MIN / -1 overflows and INT64_MIN % -1 traps
        if (n->kind == SymKind::kMod) return 0;
        if (*a == INT64_MIN) return std::nullopt;
        return -*a;
      }
      int64_t q = *a / *b, r = *a % *b;  // r, not a - q * b: that product may overflow
      if (r != 0 && ((r < 0) != (*b < 0))) {
        --q;
        r += *b;
      }
      return n->kind == SymKind::kFloorDiv ? q : r;
    }
  }
}
}  // namespace

std::optional<int64_t> SymExpr::evaluate(const Binder& bind) const { return eval(node_, bind); }

std::optional<int64_t> SymExpr::evaluate(const std::map<std::string, int64_t>& bind) const {
  return eval(node_, [&](const SymExpr& s) -> std::optional<int64_t> {
    auto it = bind.find(s.symbol_name());
    if (it == bind.end()) return std::nullopt;
    return it->second;
  });
}

// ---- substitution -------------------------------------------------------------------------------

SymExpr SymExpr::substitute(const std::function<SymExpr(const SymExpr&)>& replace) const {
  const SymNode* n = node_;
  switch (n->kind) {
    case SymKind::kConst:
      return *this;
    case SymKind::kSymbol:
      return replace(*this);
    case SymKind::kSum: {
      SymExpr r(n->value);
      for (auto& [c, m] : n->terms) r = r + SymExpr(c) * SymExpr(m).substitute(replace);
      return r;
    }
    case SymKind::kProduct: {
      SymExpr r(1);
      for (auto* f : n->factors) r = r * SymExpr(f).substitute(replace);
      return r;
    }
    default: {
      SymExpr a = SymExpr(n->lhs).substitute(replace), b = SymExpr(n->rhs).substitute(replace);
      switch (n->kind) {
        case SymKind::kFloorDiv:
          return floordiv(a, b);
        case SymKind::kMod:
          return mod(a, b);
        case SymKind::kMax:
          return max(a, b);
        default:
          return min(a, b);
      }
    }
  }
}

// ---- printing -----------------------------------------------------------------------------------

namespace {
void print(const SymNode* n, std::string& out);

// |v| in decimal; unsigned, so that INT64_MIN prints too.
std::string magnitude(int64_t v) {
  uint64_t u = static_cast<uint64_t>(v);
  return std::to_string(v < 0 ? ~u + 1 : u);
}

void print_monomial_term(int64_t coef, const SymNode* mono, bool first, std::string& out) {
  if (first) {
    if (coef == -1)
      out += "-";
    else if (coef != 1)
      out += std::to_string(coef) + "*";
  } else {
    out += coef < 0 ? " - " : " + ";
    if (coef != 1 && coef != -1) out += magnitude(coef) + "*";
  }
  print(mono, out);
}

void print(const SymNode* n, std::string& out) {
  switch (n->kind) {
    case SymKind::kConst:
      out += std::to_string(n->value);
      return;
    case SymKind::kSymbol:
      out += n->name;
      return;
    case SymKind::kSum: {
      bool first = true;
      for (auto& [c, m] : n->terms) {
        print_monomial_term(c, m, first, out);
        first = false;
      }
      if (n->value > 0) out += " + " + std::to_string(n->value);
      if (n->value < 0) out += " - " + magnitude(n->value);
      return;
    }
    case SymKind::kProduct:
      for (size_t i = 0; i < n->factors.size(); ++i) {
        if (i) out += "*";
        print(n->factors[i], out);
      }
      return;
    default: {
      const char* fn = n->kind == SymKind::kFloorDiv ? "floordiv"
                       : n->kind == SymKind::kMod    ? "mod"
                       : n->kind == SymKind::kMax    ? "max"
                                                     : "min";
      out += fn;
      out += "(";
      print(n->lhs, out);
      out += ", ";
      print(n->rhs, out);
      out += ")";
    }
  }
}
}  // namespace

std::string SymExpr::to_string() const {
  std::string s;
  print(node_, s);
  return s;
}

}  // namespace dg
