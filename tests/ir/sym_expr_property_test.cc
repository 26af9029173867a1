// Property tests for symbolic arithmetic (STYLE.md item 6): random expression trees over three
// symbols with random facts, evaluated under random bindings that respect the facts.
//   (a) the canonical form evaluates like the raw tree (floor semantics);
//   (b) canonical forms are fixed points: substitute(identity) and parse(print(e)) give e back;
//   (c) bounds() contains every value.
// The base seed is DYNGEN_PROPERTY_SEED (default 20240229) and DYNGEN_PROPERTY_CASES sets the
// number of cases (default 4000) for longer runs; a failure prints the case's seed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ir/sym_expr.h"
#include "ir/text_format.h"

namespace dg {
namespace {

enum class RawOp { kConst, kSym, kAdd, kSub, kMul, kFloorDiv, kMod, kMax, kMin };

struct Raw {
  RawOp op;
  int64_t value = 0;  // kConst
  int sym = 0;        // kSym
  std::unique_ptr<Raw> l, r;
};

struct Facts {
  int64_t lo, hi, div;
};

// One case in ten is "wide": huge constants (up to INT64_MIN / INT64_MAX) and unbounded symbols,
// to exercise the overflow paths; there the raw tree and the canonical form may overflow at
// different points, so (a) compares only where both evaluate.
struct Case {
  std::mt19937_64 rng;
  bool wide;
  Facts facts[3];
  SymExpr syms[3];

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }

  explicit Case(uint64_t seed) : rng(seed), wide(seed % 10 == 0) {  // seeds are mixed
    static const int64_t kDivs[] = {1, 1, 1, 2, 3, 4, 8};
    for (int i = 0; i < 3; ++i) {
      Facts& f = facts[i];
      f.div = kDivs[uniform(0, 6)];
      int64_t pick = uniform(0, 3);
      f.lo = pick == 0 ? 0 : pick == 1 ? 2 : uniform(-20, 20);
      f.hi = uniform(0, 2) == 0 ? Interval::kPosInf : f.lo + uniform(f.div, 60);
      if (wide && uniform(0, 1)) f.lo = Interval::kNegInf;
      syms[i] = SymExpr::symbol(std::string(1, char('a' + i)), f.lo, f.hi, f.div);
    }
  }

  int64_t constant() {
    static const int64_t kWide[] = {INT64_MIN,        INT64_MIN + 1,       INT64_MAX,
                                    int64_t{1} << 62, -(int64_t{1} << 62), int64_t{1} << 32,
                                    3037000499};
    if (wide && uniform(0, 2) == 0) return kWide[uniform(0, 6)];
    return uniform(-8, 8);
  }

  std::unique_ptr<Raw> leaf() {
    auto n = std::make_unique<Raw>();
    if (uniform(0, 1)) {
      n->op = RawOp::kConst;
      n->value = constant();
    } else {
      n->op = RawOp::kSym;
      n->sym = static_cast<int>(uniform(0, 2));
    }
    return n;
  }

  std::unique_ptr<Raw> tree(int depth) {
    if (depth == 0 || uniform(0, 4) == 0) return leaf();
    auto n = std::make_unique<Raw>();
    n->op =
        static_cast<RawOp>(uniform(static_cast<int>(RawOp::kAdd), static_cast<int>(RawOp::kMin)));
    n->l = tree(depth - 1);
    if (n->op == RawOp::kFloorDiv || n->op == RawOp::kMod) {
      int64_t pick = uniform(0, 9);
      if (pick < 7) {
        n->r = std::make_unique<Raw>();
        n->r->op = RawOp::kConst;
        n->r->value = pick < 6 ? uniform(1, 9) : -uniform(1, 9);
        return n;
      }
    }
    n->r = tree(depth - 1);
    return n;
  }

  // A value for each symbol: a multiple of its divisor within its range.
  void bind(int64_t out[3]) {
    for (int i = 0; i < 3; ++i) {
      const Facts& f = facts[i];
      int64_t lo = f.lo == Interval::kNegInf ? -(int64_t{1} << 40) : f.lo;
      int64_t hi = f.hi == Interval::kPosInf ? lo + (wide ? int64_t{1} << 41 : 100) : f.hi;
      int64_t first = lo >= 0 ? (lo + f.div - 1) / f.div * f.div : -((-lo) / f.div * f.div);
      out[i] = first + f.div * uniform(0, (hi - first) / f.div);
    }
  }

  SymExpr build(const Raw& n) {
    switch (n.op) {
      case RawOp::kConst:
        return SymExpr(n.value);
      case RawOp::kSym:
        return syms[n.sym];
      default:
        break;
    }
    SymExpr a = build(*n.l), b = build(*n.r);
    switch (n.op) {
      case RawOp::kAdd:
        return a + b;
      case RawOp::kSub:
        return a - b;
      case RawOp::kMul:
        return a * b;
      case RawOp::kFloorDiv:
        return floordiv(a, b);
      case RawOp::kMod:
        return mod(a, b);
      case RawOp::kMax:
        return max(a, b);
      default:
        return min(a, b);
    }
  }
};

std::optional<int64_t> naive_eval(const Raw& n, const int64_t env[3]) {
  if (n.op == RawOp::kConst) return n.value;
  if (n.op == RawOp::kSym) return env[n.sym];
  auto a = naive_eval(*n.l, env), b = naive_eval(*n.r, env);
  if (!a || !b) return std::nullopt;
  int64_t r;
  switch (n.op) {
    case RawOp::kAdd:
      if (__builtin_add_overflow(*a, *b, &r)) return std::nullopt;
      return r;
    case RawOp::kSub:
      if (__builtin_sub_overflow(*a, *b, &r)) return std::nullopt;
      return r;
    case RawOp::kMul:
      if (__builtin_mul_overflow(*a, *b, &r)) return std::nullopt;
      return r;
    case RawOp::kMax:
      return std::max(*a, *b);
    case RawOp::kMin:
      return std::min(*a, *b);
    default:
      break;
  }
  if (*b == 0 || (*a == INT64_MIN && *b == -1)) return std::nullopt;
  // Floor division written independently of the library: via long double-free integer logic.
  int64_t q = *a / *b, m = *a % *b;
  if (m != 0 && ((m < 0) != (*b < 0))) {
    q -= 1;
    m += *b;
  }
  return n.op == RawOp::kFloorDiv ? q : m;
}

std::string raw_to_string(const Raw& n) {
  static const char* kNames[] = {"", "", "+", "-", "*", "floordiv", "mod", "max", "min"};
  switch (n.op) {
    case RawOp::kConst:
      return std::to_string(n.value);
    case RawOp::kSym:
      return std::string(1, char('a' + n.sym));
    case RawOp::kAdd:
    case RawOp::kSub:
    case RawOp::kMul:
      return "(" + raw_to_string(*n.l) + " " + kNames[int(n.op)] + " " + raw_to_string(*n.r) + ")";
    default:
      return std::string(kNames[int(n.op)]) + "(" + raw_to_string(*n.l) + ", " +
             raw_to_string(*n.r) + ")";
  }
}

std::string bound_text(int64_t v) {
  return v == Interval::kPosInf ? "inf" : v == Interval::kNegInf ? "-inf" : std::to_string(v);
}

// Parses `e` back through the text form, as the dim of a sym input.
ParseResult parse_expr(const Case& c, const SymExpr& e) {
  std::string text = "graph @p\n";
  for (int i = 0; i < 3; ++i)
    text += "sym " + std::string(1, char('a' + i)) + " in [" + bound_text(c.facts[i].lo) + ", " +
            bound_text(c.facts[i].hi) + "] div " + std::to_string(c.facts[i].div) + "\n";
  text += "input %e: sym " + e.to_string() + "\ninput %t: f32[]\noutput %t\n";
  return parse_graph_text(text);
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* env = std::getenv(name);
  return env ? std::strtoull(env, nullptr, 10) : fallback;
}

TEST(IrSymExprProperty, CanonicalFormsEvaluateIdempotentlyAndWithinBounds) {
  const uint64_t base = env_or("DYNGEN_PROPERTY_SEED", 20240229);
  const int kCases = static_cast<int>(env_or("DYNGEN_PROPERTY_CASES", 4000)), kBindings = 6;
  int built = 0, evaluated = 0, failures = 0;
  for (int i = 0; i < kCases && failures < 5; ++i) {
    const uint64_t seed = splitmix64(base * 1000003 + static_cast<uint64_t>(i));
    Case c(seed);
    std::unique_ptr<Raw> raw = c.tree(4);
    std::optional<SymExpr> e;
    try {
      e = c.build(*raw);
    } catch (const std::domain_error&) {
      continue;  // a constant zero divisor
    } catch (const std::overflow_error&) {
      continue;
    }
    ++built;
    std::ostringstream ctx;
    ctx << "seed " << seed << " (DYNGEN_PROPERTY_SEED=" << base << ", case " << i
        << ")\n  raw:  " << raw_to_string(*raw) << "\n  form: " << e->to_string() << "\n  facts:";
    for (auto& f : c.facts)
      ctx << " [" << bound_text(f.lo) << ", " << bound_text(f.hi) << "] div " << f.div << ";";
    auto fail = [&](const std::string& what) {
      ADD_FAILURE() << what << "\n  " << ctx.str();
      ++failures;
    };

    // (b) fixed points
    SymExpr again = e->substitute([](const SymExpr& s) { return s; });
    if (again != *e) fail("substitute(identity) changed the form to " + again.to_string());
    ParseResult parsed = parse_expr(c, *e);
    if (!parsed.ok()) {
      if (parsed.error.find("grows past") == std::string::npos)
        fail("parse failed: " + parsed.error);
    } else if (parsed.graph.values[0].sym_value != *e) {
      fail("parse(print(e)) gave " + parsed.graph.values[0].sym_value.to_string());
    }

    // (a) evaluation and (c) bounds
    Interval bounds = e->bounds();
    for (int k = 0; k < kBindings; ++k) {
      int64_t env[3];
      c.bind(env);
      std::optional<int64_t> want = naive_eval(*raw, env);
      if (!want) continue;  // division by zero or overflow in the raw tree
      std::optional<int64_t> got = e->evaluate([&](const SymExpr& s) -> std::optional<int64_t> {
        return env[s.symbol_name()[0] - 'a'];
      });
      std::string at = " at a=" + std::to_string(env[0]) + " b=" + std::to_string(env[1]) +
                       " c=" + std::to_string(env[2]);
      if (c.wide) {
        if (!got) continue;
        if (*got != *want)
          fail("canonical form gives " + std::to_string(*got) + ", raw gives " +
               std::to_string(*want) + at);
        if (!bounds.contains(*got)) fail("value " + std::to_string(*got) + " outside bounds" + at);
        continue;
      }
      ++evaluated;
      if (!got) {
        fail("canonical form does not evaluate" + at + "; raw gives " + std::to_string(*want));
        break;
      }
      if (*got != *want) {
        fail("canonical form gives " + std::to_string(*got) + ", raw gives " +
             std::to_string(*want) + at);
        break;
      }
      if (!bounds.contains(*got)) {
        fail("value " + std::to_string(*got) + " outside bounds [" + bound_text(bounds.lo) + ", " +
             bound_text(bounds.hi) + "]" + at);
        break;
      }
    }
  }
  RecordProperty("built", built);
  RecordProperty("evaluated", evaluated);
  // The generator must exercise the arithmetic, not skip it.
  EXPECT_GT(built, kCases * 3 / 4);
  EXPECT_GT(evaluated, kCases * 2);
}

}  // namespace
}  // namespace dg
