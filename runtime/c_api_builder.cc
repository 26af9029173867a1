// The graph builder of runtime/dyngen.h (One IR): frontends build graphs through the core, which
// types each node and canonicalizes each symbolic expression. No exception crosses this boundary.
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/fb_writer.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "runtime/c_api_graph.h"
#include "runtime/dyngen.h"

struct dg_builder {
  dg::GraphBuilder graph;
  std::vector<dg::SymExpr> exprs;                             // handle -> expression
  std::unordered_map<const dg::SymNode*, int32_t> handle_of;  // interned: one handle per node
  std::map<std::string, dg::SymExpr> symbols;
  dg::Attrs pending;  // attributes for the next op

  explicit dg_builder(const char* name) : graph(name ? name : "graph") {}

  int32_t handle(const dg::SymExpr& e) {
    auto [it, fresh] = handle_of.emplace(e.node(), static_cast<int32_t>(exprs.size()));
    if (fresh) exprs.push_back(e);
    return it->second;
  }
  const dg::SymExpr& expr(int32_t h) const {
    if (h < 0 || static_cast<size_t>(h) >= exprs.size())
      throw std::invalid_argument("expression handle " + std::to_string(h) + " does not exist");
    return exprs[static_cast<size_t>(h)];
  }
  const dg::Value& value(int32_t v) const {
    const dg::Graph& g = graph.graph();
    if (v < 0 || static_cast<size_t>(v) >= g.values.size())
      throw std::invalid_argument("value %" + std::to_string(v) + " does not exist");
    return g.values[static_cast<size_t>(v)];
  }
};

namespace {

// Runs `body`; an std::invalid_argument is the IR refusing the request (its message is the
// IR's), anything else an internal error.
template <class F>
int build(dg_builder* b, F&& body) {
  if (!b) return dg_capi_fail(DG_ERR_INVALID_INPUT, "null builder");
  try {
    body();
    return DG_OK;
  } catch (const std::invalid_argument& e) {
    return dg_capi_fail(DG_ERR_INVALID_INPUT, e.what());
  } catch (const std::bad_alloc&) {
    return dg_capi_fail(DG_ERR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return dg_capi_fail(DG_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return dg_capi_fail(DG_ERR_INTERNAL, "internal error");
  }
}

void need(const void* p) {
  if (!p) throw std::invalid_argument("null argument");
}

dg::DType dtype_of(int32_t code) {
  auto d = dg::dtype_from_code(static_cast<uint32_t>(code));
  if (!d) throw std::invalid_argument("unknown dtype code " + std::to_string(code));
  return *d;
}

char* copy_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

}  // namespace

extern "C" {

int dg_builder_new(const char* name, dg_builder** out) {
  if (!out) return dg_capi_fail(DG_ERR_INVALID_INPUT, "null argument");
  try {
    *out = new dg_builder(name);
    return DG_OK;
  } catch (...) {
    return dg_capi_fail(DG_ERR_INTERNAL, "out of memory");
  }
}

void dg_builder_free(dg_builder* b) { delete b; }

int dg_builder_symbol(dg_builder* b, const char* name, int64_t lo, int64_t hi, int64_t divisor,
                      int32_t* expr) {
  return build(b, [&] {
    need(name);
    need(expr);
    if (b->symbols.count(name))
      throw std::invalid_argument(std::string("symbol ") + name + " declared twice");
    if (divisor < 1 || lo > hi)
      throw std::invalid_argument(std::string("bad facts for symbol ") + name);
    dg::SymExpr s = b->graph.symbol(name, lo, hi, divisor);
    b->symbols.emplace(name, s);
    *expr = b->handle(s);
  });
}

int dg_builder_const(dg_builder* b, int64_t value, int32_t* expr) {
  return build(b, [&] {
    need(expr);
    *expr = b->handle(dg::SymExpr(value));
  });
}

int dg_builder_expr(dg_builder* b, const char* op, int32_t lhs, int32_t rhs, int32_t* expr) {
  return build(b, [&] {
    need(op);
    need(expr);
    const dg::SymExpr &x = b->expr(lhs), &y = b->expr(rhs);
    std::string o = op;
    bool divides = o == "floordiv" || o == "mod" || o == "ceildiv";
    if (divides && y == dg::SymExpr(0)) throw std::invalid_argument(o + " by zero");
    if (o == "ceildiv" && y.bounds().lo < 1)
      throw std::invalid_argument("ceildiv needs a positive divisor");
    dg::SymExpr r = o == "add"        ? x + y
                    : o == "sub"      ? x - y
                    : o == "mul"      ? x * y
                    : o == "floordiv" ? dg::floordiv(x, y)
                    : o == "mod"      ? dg::mod(x, y)
                    : o == "max"      ? dg::max(x, y)
                    : o == "min"      ? dg::min(x, y)
                    : o == "ceildiv"  ? dg::ceildiv(x, y)
                                      : throw std::invalid_argument("unknown expression op " + o);
    *expr = b->handle(r);
  });
}

int dg_builder_expr_info(dg_builder* b, int32_t expr, int64_t* lo, int64_t* hi, int* is_const,
                         int* is_symbol) {
  return build(b, [&] {
    const dg::SymExpr& e = b->expr(expr);
    dg::Interval r = e.bounds();
    if (lo) *lo = r.lo;
    if (hi) *hi = r.hi;
    if (is_const) *is_const = e.is_const() ? 1 : 0;
    if (is_symbol) *is_symbol = e.is_symbol() ? 1 : 0;
  });
}

int dg_builder_provably_ge(dg_builder* b, int32_t lhs, int32_t rhs, int* result) {
  return build(b, [&] {
    need(result);
    *result = dg::provably_ge(b->expr(lhs), b->expr(rhs)) ? 1 : 0;
  });
}

int dg_builder_expr_str(dg_builder* b, int32_t expr, char** out) {
  return build(b, [&] {
    need(out);
    *out = copy_string(b->expr(expr).to_string());
  });
}

int dg_builder_expr_eval(dg_builder* b, int32_t expr, const char* const* names,
                         const int64_t* values, int count, int64_t* out) {
  return build(b, [&] {
    need(out);
    if (count > 0) {
      need(names);
      need(values);
    }
    std::map<std::string, int64_t> bind;
    for (int i = 0; i < count; ++i) bind[names[i] ? names[i] : ""] = values[i];
    auto v = b->expr(expr).evaluate(bind);
    if (!v) throw std::invalid_argument("cannot evaluate " + b->expr(expr).to_string());
    *out = *v;
  });
}

int dg_builder_input(dg_builder* b, int32_t dtype, const int32_t* dims, int rank, int32_t* value) {
  return build(b, [&] {
    need(value);
    if (rank < 0 || rank > DG_MAX_RANK) throw std::invalid_argument("rank out of range");
    if (rank) need(dims);
    std::vector<dg::SymExpr> shape;
    for (int d = 0; d < rank; ++d) {
      const dg::SymExpr& e = b->expr(dims[d]);
      if (e.bounds().lo < 0)
        throw std::invalid_argument("dimension " + e.to_string() + " may be negative");
      shape.push_back(e);
    }
    *value = b->graph.input(dtype_of(dtype), std::move(shape));
  });
}

int dg_builder_sym_input(dg_builder* b, int32_t expr, int32_t* value) {
  return build(b, [&] {
    need(value);
    *value = b->graph.sym_input(b->expr(expr));
  });
}

int dg_builder_attr_int(dg_builder* b, const char* name, int64_t value) {
  return build(b, [&] {
    need(name);
    b->pending.set(name, value);
  });
}

int dg_builder_attr_float(dg_builder* b, const char* name, double value) {
  return build(b, [&] {
    need(name);
    b->pending.set(name, value);
  });
}

int dg_builder_attr_ints(dg_builder* b, const char* name, const int64_t* values, int count) {
  return build(b, [&] {
    need(name);
    if (count < 0) throw std::invalid_argument("negative count");
    if (count) need(values);
    b->pending.set(name, std::vector<int64_t>(values, values + count));
  });
}

int dg_builder_attr_syms(dg_builder* b, const char* name, const int32_t* exprs, int count) {
  return build(b, [&] {
    need(name);
    if (count < 0) throw std::invalid_argument("negative count");
    if (count) need(exprs);
    std::vector<dg::SymExpr> xs;
    for (int i = 0; i < count; ++i) xs.push_back(b->expr(exprs[i]));
    b->pending.set(name, std::move(xs));
  });
}

int dg_builder_attr_dtype(dg_builder* b, const char* name, int32_t dtype) {
  return build(b, [&] {
    need(name);
    b->pending.set(name, dtype_of(dtype));
  });
}

int dg_builder_op(dg_builder* b, const char* op, const int32_t* inputs, int count, int32_t* value) {
  return build(b, [&] {
    need(op);
    need(value);
    dg::Attrs attrs = std::move(b->pending);
    b->pending = dg::Attrs();
    auto kind = dg::op_from_name(op);
    if (!kind) throw std::invalid_argument(std::string("unknown op '") + op + "'");
    if (count < 0) throw std::invalid_argument("negative operand count");
    if (count) need(inputs);
    *value = b->graph.op(*kind, std::vector<dg::ValueId>(inputs, inputs + count), std::move(attrs));
  });
}

int dg_builder_value_type(dg_builder* b, int32_t value, int32_t* dtype, int32_t* rank,
                          int32_t dims[DG_MAX_RANK]) {
  return build(b, [&] {
    need(rank);
    need(dims);
    const dg::Value& v = b->value(value);
    if (v.kind == dg::ValueKind::kSymInt) {
      *rank = -1;
      dims[0] = b->handle(v.sym_value);
      if (dtype) *dtype = static_cast<int32_t>(dg::DType::kI64);
      return;
    }
    if (v.type.rank() > DG_MAX_RANK) throw std::invalid_argument("rank above DG_MAX_RANK");
    if (dtype) *dtype = static_cast<int32_t>(v.type.dtype);
    *rank = v.type.rank();
    for (int d = 0; d < v.type.rank(); ++d) dims[d] = b->handle(v.type.shape[d]);
  });
}

int dg_builder_output(dg_builder* b, int32_t value) {
  return build(b, [&] {
    b->value(value);
    b->graph.output(value);
  });
}

int dg_builder_finish(dg_builder* b, dg_graph** out) {
  return build(b, [&] {
    need(out);
    dg::Graph g = b->graph.graph();
    std::string error = dg::verify_graph(g);
    if (!error.empty()) throw std::invalid_argument(error);
    *out = new dg_graph{std::move(g)};
  });
}

int dg_graph_to_builder(const dg_graph* g, dg_builder** out) {
  if (!g || !out) return dg_capi_fail(DG_ERR_INVALID_INPUT, "null argument");
  dg_builder* b = nullptr;
  try {
    b = new dg_builder(g->graph.name.c_str());
    for (const dg::SymExpr& s : g->graph.symbols)
      b->symbols.emplace(s.symbol_name(), b->graph.symbol(s.symbol_name(), s.symbol_range().lo,
                                                          s.symbol_range().hi, s.symbol_divisor()));
    // The loaded graph's values keep their ids: replay inputs and nodes in id order.
    const dg::Graph& src = g->graph;
    std::vector<int32_t> id_of(src.values.size(), -1);
    for (dg::ValueId in : src.inputs) {
      const dg::Value& v = src.value(in);
      id_of[static_cast<size_t>(in)] = v.kind == dg::ValueKind::kSymInt
                                           ? b->graph.sym_input(v.sym_value)
                                           : b->graph.input(v.type.dtype, v.type.shape);
    }
    for (const dg::Node& n : src.nodes) {
      std::vector<dg::ValueId> ins;
      for (dg::ValueId i : n.inputs) ins.push_back(id_of.at(static_cast<size_t>(i)));
      id_of[static_cast<size_t>(n.output)] = b->graph.op(n.op, ins, n.attrs);
    }
    for (dg::ValueId o : src.outputs) b->graph.output(id_of.at(static_cast<size_t>(o)));
    *out = b;
    return DG_OK;
  } catch (const std::exception& e) {
    delete b;
    return dg_capi_fail(DG_ERR_INVALID_INPUT, e.what());
  }
}

int dg_builder_symbols(dg_builder* b, int32_t* exprs, int capacity, int* count) {
  return build(b, [&] {
    need(count);
    const auto& syms = b->graph.graph().symbols;
    *count = static_cast<int>(syms.size());
    for (int i = 0; i < *count && i < capacity; ++i)
      exprs[i] = b->handle(syms[static_cast<size_t>(i)]);
  });
}

int dg_builder_inputs(dg_builder* b, int32_t* values, int capacity, int* count) {
  return build(b, [&] {
    need(count);
    const auto& ins = b->graph.graph().inputs;
    *count = static_cast<int>(ins.size());
    for (int i = 0; i < *count && i < capacity; ++i) values[i] = ins[static_cast<size_t>(i)];
  });
}

int dg_builder_num_nodes(dg_builder* b, int* count) {
  return build(b, [&] {
    need(count);
    *count = static_cast<int>(b->graph.graph().nodes.size());
  });
}

int dg_graph_write_fb(const dg_graph* g, void** data, size_t* size) {
  if (!g || !data || !size) return dg_capi_fail(DG_ERR_INVALID_INPUT, "null argument");
  try {
    std::string bytes = dg::write_graph_fb(g->graph);
    void* p = std::malloc(bytes.size() ? bytes.size() : 1);
    if (!p) return dg_capi_fail(DG_ERR_INTERNAL, "out of memory");
    std::memcpy(p, bytes.data(), bytes.size());
    *data = p;
    *size = bytes.size();
    return DG_OK;
  } catch (const std::exception& e) {
    return dg_capi_fail(DG_ERR_INVALID_INPUT, e.what());
  }
}

}  // extern "C"
