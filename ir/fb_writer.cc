#include "ir/fb_writer.h"

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>

#include "ir/fb_loader.h"
#include "ir/graph_generated.h"
#include "ir/sym_node.h"

namespace dg {
namespace {

namespace fbs = flatbuffers;

// Note [Writer within the loader's range]
// A file dyngen writes must load again, so the writer
// refuses what the loader rejects as out of range, with a message naming it, instead of writing
// it. (The loader's resource limits, FbLimits, bound untrusted files; a graph beyond those is
// still written, and loads with larger limits.)
int64_t checked_magnitude(int64_t v, const std::string& what) {
  if (v < -kGraphFbMaxConst || v > kGraphFbMaxConst)
    // Refused here, not written (Note [Writer within the loader's range]).
    throw std::invalid_argument("write_graph_fb: " + what + " " + std::to_string(v) +
                                " is beyond +-2^62, the range graph.fb holds");
  return v;
}

// The symbolic-expression table of graph.fbs: every distinct interned node once, operands
// before the entries that use them. A sum's scaled term c*m is a Product(Const c, m) entry.
class ExprTable {
 public:
  explicit ExprTable(const std::vector<SymExpr>& symbols) {
    for (size_t i = 0; i < symbols.size(); ++i)
      symbol_index_.emplace(symbols[i].node(), static_cast<uint32_t>(i));
  }

  uint32_t index(const SymExpr& e) { return emit(e.node()); }

  std::vector<fbs::Offset<fb::Expr>> build(fbs::FlatBufferBuilder& b) const {
    std::vector<fbs::Offset<fb::Expr>> out;
    out.reserve(entries_.size());
    for (const Entry& e : entries_) {
      auto operands = e.operands.empty() ? 0 : b.CreateVector(e.operands);
      fb::ExprBuilder eb(b);
      eb.add_kind(e.kind);
      if (e.value != 0) eb.add_value(e.value);
      if (e.symbol != 0) eb.add_symbol(e.symbol);
      if (!e.operands.empty()) eb.add_operands(operands);
      out.push_back(eb.Finish());
    }
    return out;
  }

 private:
  struct Entry {
    fb::ExprKind kind = fb::ExprKind::Invalid;
    int64_t value = 0;
    uint32_t symbol = 0;
    std::vector<uint32_t> operands;
  };

  uint32_t add(Entry e) {
    entries_.push_back(std::move(e));
    return static_cast<uint32_t>(entries_.size() - 1);
  }

  uint32_t emit(const SymNode* n) {
    if (auto it = index_.find(n); it != index_.end()) return it->second;
    Entry e;
    switch (n->kind) {
      case SymKind::kConst:
        e.kind = fb::ExprKind::Const;
        e.value = checked_magnitude(n->value, "constant");
        break;
      case SymKind::kSymbol: {
        auto it = symbol_index_.find(n);
        if (it == symbol_index_.end())
          throw std::invalid_argument("write_graph_fb: symbol " + n->name +
                                      " is used but not declared (with these facts)");
        e.kind = fb::ExprKind::Symbol;
        e.symbol = it->second;
        break;
      }
      case SymKind::kSum:
        e.kind = fb::ExprKind::Sum;
        for (auto& [coef, mono] : n->terms) e.operands.push_back(emit_term(coef, mono));
        if (n->value != 0) e.operands.push_back(emit(intern_const(n->value)));
        break;
      case SymKind::kProduct:
        e.kind = fb::ExprKind::Product;
        for (const SymNode* f : n->factors) e.operands.push_back(emit(f));
        break;
      case SymKind::kFloorDiv:
      case SymKind::kMod:
      case SymKind::kMax:
      case SymKind::kMin:
        e.kind = n->kind == SymKind::kFloorDiv ? fb::ExprKind::FloorDiv
                 : n->kind == SymKind::kMod    ? fb::ExprKind::Mod
                 : n->kind == SymKind::kMax    ? fb::ExprKind::Max
                                               : fb::ExprKind::Min;
        e.operands = {emit(n->lhs), emit(n->rhs)};
        break;
    }
    uint32_t i = add(std::move(e));
    index_.emplace(n, i);
    return i;
  }

  uint32_t emit_term(int64_t coef, const SymNode* mono) {
    if (coef == 1) return emit(mono);
    auto key = std::make_pair(coef, mono);
    if (auto it = term_index_.find(key); it != term_index_.end()) return it->second;
    Entry e;
    e.kind = fb::ExprKind::Product;
    e.operands = {emit(intern_const(coef)), emit(mono)};
    uint32_t i = add(std::move(e));
    term_index_.emplace(key, i);
    return i;
  }

  std::unordered_map<const SymNode*, uint32_t> symbol_index_;
  std::unordered_map<const SymNode*, uint32_t> index_;
  std::map<std::pair<int64_t, const SymNode*>, uint32_t> term_index_;
  std::vector<Entry> entries_;
};

uint32_t value_id(ValueId id) {
  if (id < 0) throw std::invalid_argument("write_graph_fb: negative value id");
  return static_cast<uint32_t>(id);
}

std::vector<uint32_t> value_ids(const std::vector<ValueId>& ids) {
  std::vector<uint32_t> out;
  out.reserve(ids.size());
  for (ValueId id : ids) out.push_back(value_id(id));
  return out;
}

fbs::Offset<fb::Attr> build_attr(fbs::FlatBufferBuilder& b, ExprTable& exprs,
                                 const std::string& name, const AttrValue& v) {
  auto name_off = b.CreateString(name);
  fbs::Offset<fbs::Vector<int64_t>> ints;
  fbs::Offset<fbs::Vector<uint32_t>> syms;
  if (auto* is = std::get_if<std::vector<int64_t>>(&v)) ints = b.CreateVector(*is);
  if (auto* es = std::get_if<std::vector<SymExpr>>(&v)) {
    std::vector<uint32_t> idx;
    for (const SymExpr& e : *es) idx.push_back(exprs.index(e));
    syms = b.CreateVector(idx);
  }
  fb::AttrBuilder ab(b);
  ab.add_name(name_off);
  if (auto* i = std::get_if<int64_t>(&v)) {
    ab.add_kind(fb::AttrKind::Int);
    ab.add_i(*i);
  } else if (auto* f = std::get_if<double>(&v)) {
    ab.add_kind(fb::AttrKind::Float);
    // -0.0 compares equal to the field's default 0.0, which the builder would leave out (and a
    // reader would then see +0.0): force it in.
    b.ForceDefaults(*f == 0.0 && std::signbit(*f));
    ab.add_f(*f);
    b.ForceDefaults(false);
  } else if (std::holds_alternative<std::vector<int64_t>>(v)) {
    ab.add_kind(fb::AttrKind::Ints);
    ab.add_ints(ints);
  } else if (std::holds_alternative<std::vector<SymExpr>>(v)) {
    ab.add_kind(fb::AttrKind::Exprs);
    ab.add_exprs(syms);
  } else {
    ab.add_kind(fb::AttrKind::Dtype);
    ab.add_dtype(static_cast<fb::DType>(std::get<DType>(v)));
  }
  return ab.Finish();
}

}  // namespace

std::string write_graph_fb(const Graph& g) {
  fbs::FlatBufferBuilder b(4096);
  ExprTable exprs(g.symbols);

  std::vector<fbs::Offset<fb::Symbol>> symbols;
  for (const SymExpr& s : g.symbols) {
    if (!s.is_symbol())
      throw std::invalid_argument("write_graph_fb: declared symbol " + s.to_string() +
                                  " is not a symbol");
    Interval r = s.symbol_range();
    if (r.lo != Interval::kNegInf) checked_magnitude(r.lo, "bound of symbol " + s.symbol_name());
    if (r.hi != Interval::kPosInf) checked_magnitude(r.hi, "bound of symbol " + s.symbol_name());
    checked_magnitude(s.symbol_divisor(), "divisor of symbol " + s.symbol_name());
    auto name = b.CreateString(s.symbol_name());
    fb::SymbolBuilder sb(b);
    sb.add_name(name);
    if (r.lo == Interval::kNegInf)
      sb.add_lo_unbounded(true);
    else
      sb.add_lo(r.lo);
    if (r.hi == Interval::kPosInf)
      sb.add_hi_unbounded(true);
    else
      sb.add_hi(r.hi);
    sb.add_divisor(s.symbol_divisor());
    symbols.push_back(sb.Finish());
  }

  std::vector<fbs::Offset<fb::Value>> values;
  for (const Value& v : g.values) {
    fbs::Offset<fbs::Vector<uint32_t>> shape;
    uint32_t sym = 0;
    if (v.kind == ValueKind::kTensor) {
      std::vector<uint32_t> dims;
      for (const SymExpr& d : v.type.shape) dims.push_back(exprs.index(d));
      shape = b.CreateVector(dims);
    } else {
      sym = exprs.index(v.sym_value);
    }
    fb::ValueBuilder vb(b);
    if (v.kind == ValueKind::kTensor) {
      vb.add_kind(fb::ValueKind::Tensor);
      vb.add_dtype(static_cast<fb::DType>(v.type.dtype));
      vb.add_shape(shape);
    } else {
      vb.add_kind(fb::ValueKind::SymInt);
      vb.add_sym_value(sym);
    }
    values.push_back(vb.Finish());
  }

  std::vector<fbs::Offset<fb::Node>> nodes;
  for (const Node& n : g.nodes) {
    std::vector<fbs::Offset<fb::Attr>> attrs;
    for (auto& [name, v] : n.attrs.entries()) attrs.push_back(build_attr(b, exprs, name, v));
    auto inputs = b.CreateVector(value_ids(n.inputs));
    auto attr_vec = attrs.empty() ? 0 : b.CreateVector(attrs);
    fb::NodeBuilder nb(b);
    nb.add_op(static_cast<uint32_t>(n.op));
    nb.add_inputs(inputs);
    nb.add_output(value_id(n.output));
    if (!attrs.empty()) nb.add_attrs(attr_vec);
    nodes.push_back(nb.Finish());
  }

  auto expr_offsets = exprs.build(b);
  auto name = g.name.empty() ? 0 : b.CreateString(g.name);
  auto symbols_vec = b.CreateVector(symbols);
  auto exprs_vec = b.CreateVector(expr_offsets);
  auto values_vec = b.CreateVector(values);
  auto inputs_vec = b.CreateVector(value_ids(g.inputs));
  auto outputs_vec = b.CreateVector(value_ids(g.outputs));
  auto nodes_vec = b.CreateVector(nodes);
  fb::GraphBuilder gb(b);
  gb.add_version(kGraphFbVersion);
  if (!g.name.empty()) gb.add_name(name);
  gb.add_symbols(symbols_vec);
  gb.add_exprs(exprs_vec);
  gb.add_values(values_vec);
  gb.add_inputs(inputs_vec);
  gb.add_outputs(outputs_vec);
  gb.add_nodes(nodes_vec);
  fb::FinishGraphBuffer(b, gb.Finish());
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

}  // namespace dg
