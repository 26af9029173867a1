#include "ir/fb_loader.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "ir/graph_generated.h"
#include "ir/sym_node.h"
#include "ir/verifier.h"

namespace dg {
namespace {

namespace fbs = flatbuffers;

constexpr int64_t kMaxConst = kGraphFbMaxConst;
// Work charged for each expression operation, value and node besides its size-dependent part
// (interning, allocation): bounds the time of inputs made of very many tiny steps.
constexpr int64_t kStepCost = 16;

// The first problem found; load_graph_fb turns it into LoadResult::error.
struct LoadError {
  std::string message;
};
[[noreturn]] void fail(std::string message) { throw LoadError{std::move(message)}; }

std::string num(uint64_t v) { return std::to_string(v); }

int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

bool is_identifier(std::string_view s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

// Words the text form gives a meaning inside expressions and `sym` lines.
bool reserved_symbol_name(std::string_view n) {
  for (const char* w : {"floordiv", "mod", "max", "min", "inf", "nan", "sym", "in", "div"})
    if (n == w) return true;
  return false;
}

// Graph names follow the text form's `@name`: letters, digits, '_', '.', '-'.
bool is_graph_name(std::string_view s, size_t max_len) {
  if (s.size() > max_len) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

std::string_view str(const fbs::String* s) {
  return s ? std::string_view(s->c_str(), s->size()) : std::string_view();
}

template <class T>
uint32_t len(const fbs::Vector<T>* v) {
  return v ? v->size() : 0;
}

// Note [Vector element alignment]
// The FlatBuffers verifier checks a vector's length word (4-byte aligned) but not the alignment
// of its elements, and the builder aligns an EMPTY vector only for its length word
// (FlatBufferBuilder::PreAlign returns early on 0 bytes), so a `[long]` may start 4 bytes off an
// 8-byte boundary, in files dyngen's own writer makes. A reader must accept what the verifier
// accepts: the elements are copied out byte-wise, never dereferenced in place (a misaligned
// int64 load is undefined behaviour, and UBSan says so).
std::vector<int64_t> int64_elements(const fbs::Vector<int64_t>* v) {
  std::vector<int64_t> out(len(v));
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(int64_t));
  for (int64_t& x : out) x = fbs::EndianScalar(x);
  return out;
}

// Tree size and depth of a canonical expression; `ok` is false when a constant or coefficient
// lies outside +-2^62.
struct Shape {
  int64_t size = 1;
  int depth = 1;
  bool ok = true;
};

class Loader {
 public:
  Loader(const fb::Graph& root, const FbLimits& limits) : root_(root), lim_(limits) {}

  Graph run() {
    uint32_t version = root_.version();
    if (version == 0) fail("missing schema version");
    if (version > kGraphFbVersion)
      fail("written for graph.fb schema version " + num(version) + "; this dyngen reads up to " +
           num(kGraphFbVersion));
    std::string_view name = str(root_.name());
    if (!is_graph_name(name, lim_.max_name)) fail("invalid graph name");
    g_.name = std::string(name);
    load_symbols();
    load_exprs();
    load_values();
    load_nodes();
    g_.inputs = ids(root_.inputs(), "graph input");
    g_.outputs = ids(root_.outputs(), "graph output");
    return std::move(g_);
  }

 private:
  // Budgets: building expressions (each step interns new nodes, which live for the whole
  // process) and verifying the nodes (Note [graph.fb loader checks]).
  void charge_expr(int64_t work) {
    expr_work_ = sat_add(expr_work_, work);
    if (expr_work_ > lim_.max_expr_work) fail("expressions too complex (work budget exhausted)");
  }
  void charge(int64_t work) {
    work_ = sat_add(work_, work);
    if (work_ > lim_.max_work) fail("graph too complex (work budget exhausted)");
  }

  void load_symbols() {
    uint32_t n = len(root_.symbols());
    if (n > lim_.max_symbols) fail("too many symbols (" + num(n) + ")");
    std::set<std::string_view> names;
    for (uint32_t i = 0; i < n; ++i) {
      const fb::Symbol* s = root_.symbols()->Get(i);
      std::string_view name = str(s->name());
      std::string where = "symbol " + num(i);
      if (!is_identifier(name, lim_.max_name) || reserved_symbol_name(name))
        fail(where + " has an invalid name");
      where = "symbol " + std::string(name);
      if (!names.insert(name).second) fail(where + " declared twice");
      int64_t lo = s->lo_unbounded() ? Interval::kNegInf : s->lo();
      int64_t hi = s->hi_unbounded() ? Interval::kPosInf : s->hi();
      if ((!s->lo_unbounded() && (lo < -kMaxConst || lo > kMaxConst)) ||
          (!s->hi_unbounded() && (hi < -kMaxConst || hi > kMaxConst)))
        fail(where + " has a bound beyond 2^62");
      if (lo >= hi) fail(where + " has an empty or single-valued range");
      if (s->divisor() < 1 || s->divisor() > kMaxConst) fail(where + " has an invalid divisor");
      g_.symbols.push_back(SymExpr::symbol(std::string(name), lo, hi, s->divisor()));
    }
  }

  Shape measure(const SymNode* n, int level) {
    if (auto it = shapes_.find(n); it != shapes_.end()) return it->second;
    Shape r;
    if (level > lim_.max_expr_depth + 8) return {INT64_MAX, level, false};
    auto add = [&](const SymNode* c) {
      Shape s = measure(c, level + 1);
      r.size = sat_add(r.size, s.size);
      r.depth = std::max(r.depth, s.depth + 1);
      r.ok = r.ok && s.ok;
    };
    auto in_range = [](int64_t v) { return v >= -kMaxConst && v <= kMaxConst; };
    switch (n->kind) {
      case SymKind::kConst:
        r.ok = in_range(n->value);
        break;
      case SymKind::kSymbol:
        break;
      case SymKind::kSum:
        r.ok = in_range(n->value);
        for (auto& [coef, mono] : n->terms) {
          r.ok = r.ok && in_range(coef);
          r.size = sat_add(r.size, 1);
          add(mono);
        }
        break;
      case SymKind::kProduct:
        for (const SymNode* f : n->factors) add(f);
        break;
      default:
        add(n->lhs);
        add(n->rhs);
    }
    shapes_.emplace(n, r);
    return r;
  }

  // Checks a freshly built expression against the limits and records its shape.
  SymExpr accept(const SymExpr& e, const std::string& where) {
    Shape s = measure(e.node(), 0);
    if (s.depth > lim_.max_expr_depth) fail(where + ": expression nested too deeply");
    if (s.size > lim_.max_expr_size) fail(where + ": expression too large");
    if (!s.ok) fail(where + ": a constant exceeds 2^62");
    charge_expr(s.size);
    return e;
  }

  int64_t size_of(const SymExpr& e) { return measure(e.node(), 0).size; }

  SymExpr build_expr(const fb::Expr& e, uint32_t i) {
    std::string where = "expression " + num(i);
    uint32_t n = len(e.operands());
    auto operand = [&](uint32_t k) -> const SymExpr& {
      uint32_t j = e.operands()->Get(k);
      if (j >= i) fail(where + ": operand " + num(j) + " is not an earlier entry");
      return exprs_[j];
    };
    auto arity = [&](uint32_t lo, uint32_t hi) {
      if (n < lo || n > hi) fail(where + ": wrong number of operands (" + num(n) + ")");
    };
    switch (e.kind()) {
      case fb::ExprKind::Const:
        arity(0, 0);
        if (e.value() < -kMaxConst || e.value() > kMaxConst) fail(where + ": constant beyond 2^62");
        return SymExpr(e.value());
      case fb::ExprKind::Symbol:
        arity(0, 0);
        if (e.symbol() >= g_.symbols.size()) fail(where + ": symbol index out of range");
        return g_.symbols[e.symbol()];
      case fb::ExprKind::Sum:
      case fb::ExprKind::Product: {
        arity(1, UINT32_MAX);
        bool sum = e.kind() == fb::ExprKind::Sum;
        SymExpr acc = operand(0);
        for (uint32_t k = 1; k < n; ++k) {
          const SymExpr& x = operand(k);
          int64_t a = size_of(acc), b = size_of(x);
          // A product's canonical form can have up to size(a) * size(b) nodes: refuse before
          // expanding rather than after.
          if (!sum && sat_mul(a, b) > 4 * lim_.max_expr_size)
            fail(where + ": expression too large");
          charge_expr(kStepCost + (sum ? a + b : a * b));
          acc = accept(sum ? acc + x : acc * x, where);
        }
        return acc;
      }
      case fb::ExprKind::FloorDiv:
      case fb::ExprKind::Mod:
      case fb::ExprKind::Max:
      case fb::ExprKind::Min: {
        arity(2, 2);
        const SymExpr &a = operand(0), &b = operand(1);
        charge_expr(kStepCost + size_of(a) + size_of(b));
        switch (e.kind()) {
          case fb::ExprKind::FloorDiv:
            return floordiv(a, b);
          case fb::ExprKind::Mod:
            return mod(a, b);
          case fb::ExprKind::Max:
            return max(a, b);
          default:
            return min(a, b);
        }
      }
      default:
        fail(where + ": unknown kind " + num(static_cast<uint32_t>(e.kind())));
    }
  }

  void load_exprs() {
    uint32_t n = len(root_.exprs());
    if (n > lim_.max_exprs) fail("too many expressions (" + num(n) + ")");
    exprs_.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      std::string where = "expression " + num(i);
      try {
        exprs_.push_back(accept(build_expr(*root_.exprs()->Get(i), i), where));
      } catch (const std::exception& ex) {  // overflow, division by zero, ...
        fail(where + ": " + ex.what());
      }
    }
  }

  const SymExpr& expr(uint32_t index, const std::string& where) {
    if (index >= exprs_.size())
      fail(where + " refers to expression " + num(index) + ", out of range");
    return exprs_[index];
  }

  // Roughly what verify_graph and shape inference spend on a value each time they see it
  // (free symbols and bounds per dim, numel's polynomial expansion for reshape).
  int64_t value_cost(const Value& v) {
    if (v.kind == ValueKind::kSymInt) return sat_mul(size_of(v.sym_value), size_of(v.sym_value));
    return shape_cost(v.type.shape);
  }
  int64_t shape_cost(const std::vector<SymExpr>& dims) {
    int64_t terms = 1, sq = 1;
    for (const SymExpr& d : dims) {
      const SymNode* n = d.node();
      int64_t t = n->kind == SymKind::kSum ? static_cast<int64_t>(n->terms.size()) + 1 : 1;
      terms = sat_mul(terms, t);
      sq = sat_add(sq, sat_mul(size_of(d), size_of(d)));
    }
    return sat_mul(terms, sq);
  }

  void load_values() {
    uint32_t n = len(root_.values());
    if (n > lim_.max_values) fail("too many values (" + num(n) + ")");
    for (uint32_t i = 0; i < n; ++i) {
      const fb::Value* fv = root_.values()->Get(i);
      std::string where = "value %" + num(i);
      Value v;
      switch (fv->kind()) {
        case fb::ValueKind::Tensor: {
          auto dtype = dtype_from_code(static_cast<uint32_t>(fv->dtype()));
          if (!dtype)
            fail(where + " has unknown dtype code " + num(static_cast<uint32_t>(fv->dtype())));
          uint32_t rank = len(fv->shape());
          if (rank > static_cast<uint32_t>(lim_.max_rank))
            fail(where + " has rank " + num(rank) + ", above the limit " + num(lim_.max_rank));
          v.type.dtype = *dtype;
          for (uint32_t d = 0; d < rank; ++d)
            v.type.shape.push_back(expr(fv->shape()->Get(d), where));
          break;
        }
        case fb::ValueKind::SymInt:
          v.kind = ValueKind::kSymInt;
          if (!fv->sym_value()) fail(where + " is a symint without sym_value");
          v.sym_value = expr(*fv->sym_value(), where);
          break;
        default:
          fail(where + " has unknown kind " + num(static_cast<uint32_t>(fv->kind())));
      }
      value_cost_.push_back(sat_add(kStepCost, value_cost(v)));
      charge(value_cost_.back());
      g_.values.push_back(std::move(v));
    }
  }

  ValueId id(uint32_t raw, const std::string& where) {
    if (raw >= g_.values.size()) fail(where + " refers to value %" + num(raw) + ", out of range");
    return static_cast<ValueId>(raw);
  }

  std::vector<ValueId> ids(const fbs::Vector<uint32_t>* v, const std::string& where) {
    std::vector<ValueId> out;
    for (uint32_t i = 0; i < len(v); ++i) out.push_back(id(v->Get(i), where));
    return out;
  }

  AttrValue load_attr(const fb::Attr& a, const std::string& where) {
    switch (a.kind()) {
      case fb::AttrKind::Int:
        return a.i();
      case fb::AttrKind::Float:
        return a.f();
      case fb::AttrKind::Ints: {
        if (len(a.ints()) > lim_.max_list) fail(where + " is too long");
        return int64_elements(a.ints());
      }
      case fb::AttrKind::Exprs: {
        uint32_t n = len(a.exprs());
        if (n > lim_.max_list) fail(where + " is too long");
        std::vector<SymExpr> out;
        for (uint32_t k = 0; k < n; ++k) out.push_back(expr(a.exprs()->Get(k), where));
        charge(shape_cost(out));
        return out;
      }
      case fb::AttrKind::Dtype: {
        auto dtype = dtype_from_code(static_cast<uint32_t>(a.dtype()));
        if (!dtype)
          fail(where + " has unknown dtype code " + num(static_cast<uint32_t>(a.dtype())));
        return *dtype;
      }
      default:
        fail(where + " has unknown kind " + num(static_cast<uint32_t>(a.kind())));
    }
  }

  void load_nodes() {
    uint32_t n = len(root_.nodes());
    if (n > g_.values.size()) fail("more nodes than values");
    for (uint32_t i = 0; i < n; ++i) {
      const fb::Node* fn = root_.nodes()->Get(i);
      std::string where = "node " + num(i);
      auto op = op_from_code(fn->op());
      if (!op) fail(where + " has unknown op code " + num(fn->op()));
      where += " (" + std::string(op_name(*op)) + ")";
      Node node;
      node.op = *op;
      if (len(fn->inputs()) > lim_.max_node_inputs) fail(where + " has too many operands");
      node.inputs = ids(fn->inputs(), where);
      if (!fn->output()) fail(where + " has no output");
      node.output = id(*fn->output(), where);
      Value& out = g_.values[node.output];
      if (out.producer != -1) fail("value %" + num(node.output) + " is defined by two nodes");
      out.producer = static_cast<int>(i);
      uint32_t na = len(fn->attrs());
      if (na > lim_.max_attrs) fail(where + " has too many attributes");
      int64_t cost = value_cost_[node.output];
      for (ValueId in : node.inputs) cost = sat_add(cost, value_cost_[in]);
      for (uint32_t k = 0; k < na; ++k) {
        const fb::Attr* a = fn->attrs()->Get(k);
        std::string_view name = str(a->name());
        if (!is_identifier(name, lim_.max_name)) fail(where + " has an invalid attribute name");
        std::string attr_where = where + " attribute " + std::string(name);
        if (node.attrs.has(std::string(name))) fail(attr_where + " given twice");
        node.attrs.set(std::string(name), load_attr(*a, attr_where));
      }
      charge(cost);
      g_.nodes.push_back(std::move(node));
    }
  }

  const fb::Graph& root_;
  const FbLimits& lim_;
  Graph g_;
  std::vector<SymExpr> exprs_;
  std::vector<int64_t> value_cost_;
  std::unordered_map<const SymNode*, Shape> shapes_;
  int64_t expr_work_ = 0;
  int64_t work_ = 0;
};

}  // namespace

LoadResult load_graph_fb(const void* data, size_t size) { return load_graph_fb(data, size, {}); }

LoadResult load_graph_fb(const void* data, size_t size, const FbLimits& limits) {
  LoadResult r;
  try {
    if (size == 0 || data == nullptr) {
      r.error = "empty file";
      return r;
    }
    if (size > limits.max_bytes) {
      r.error = "file of " + num(size) + " bytes exceeds the limit of " + num(limits.max_bytes);
      return r;
    }
    if (size < 8 || !fb::GraphBufferHasIdentifier(data)) {
      r.error = "not a dyngen graph.fb file (no \"DGIR\" file identifier)";
      return r;
    }
    // FlatBuffers reads scalars in place: give it an 8-byte-aligned copy when needed.
    std::unique_ptr<uint64_t[]> aligned;
    const uint8_t* bytes = static_cast<const uint8_t*>(data);
    if (reinterpret_cast<uintptr_t>(data) % alignof(uint64_t) != 0) {
      aligned.reset(new uint64_t[(size + 7) / 8]);
      std::memcpy(aligned.get(), data, size);
      bytes = reinterpret_cast<const uint8_t*>(aligned.get());
    }
    fbs::Verifier::Options opts;
    opts.max_depth = limits.max_table_depth;
    opts.max_tables = limits.max_tables;
    fbs::Verifier verifier(bytes, size, opts);
    if (!fb::VerifyGraphBuffer(verifier)) {
      r.error = "corrupt or truncated graph.fb (FlatBuffers structure check failed)";
      return r;
    }
    r.graph = Loader(*fb::GetGraph(bytes), limits).run();
    std::string err =
        verify_graph(r.graph, VerifyLimits{limits.max_rank, static_cast<int>(limits.max_values)});
    if (!err.empty()) r.error = "invalid graph: " + err;
  } catch (const LoadError& e) {
    r.error = e.message;
  } catch (const std::exception& e) {
    r.error = std::string("cannot load graph.fb: ") + e.what();
  } catch (...) {
    r.error = "cannot load graph.fb: unknown error";
  }
  if (!r.ok()) r.graph = Graph();
  return r;
}

}  // namespace dg
