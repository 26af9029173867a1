// Parser for the text form (see Note [IR text form] in ir/text_format.h).
//
// Note [Text parser robustness]
// The text may come from anywhere (golden files, dumps, fuzzers), so the parser treats it as
// untrusted: it bounds the input size, the number of values, the rank of a type and the nesting of
// expressions; integer literals are checked against int64 (a literal that is negated in the text,
// as in `s0 - 9223372036854775808`, may reach INT64_MIN); symbolic arithmetic that overflows or
// divides by zero is reported, never thrown out. Every failure is "line N: message". Each node's
// declared type is checked against shape inference as soon as its line is read, and the finished
// graph goes through verify_graph.
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/shape_infer.h"
#include "ir/text_cursor.h"
#include "ir/text_expr_parser.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace dg {
namespace {

constexpr size_t kMaxTextBytes = size_t{64} << 20;
constexpr size_t kMaxOperands = 4096;

using text_parse::Cursor;
using text_parse::fail;
using text_parse::is_digit;
using text_parse::SymbolTable;
using text_parse::SyntaxError;

bool reserved_symbol_name(std::string_view n) {
  return n == "floordiv" || n == "mod" || n == "max" || n == "min" || n == "inf" || n == "nan" ||
         n == "sym" || n == "in" || n == "div";
}

struct ValueDef {
  ValueId id;
  int line;
};

class GraphParser {
 public:
  explicit GraphParser(std::string_view text) : text_(text) {}

  ParseResult run() {
    ParseResult r;
    try {
      if (text_.size() > kMaxTextBytes)
        throw SyntaxError{"input is too large (" + std::to_string(text_.size()) + " bytes, limit " +
                          std::to_string(kMaxTextBytes) + ")"};
      split_lines();
      prescan_definitions();
      for (line_ = 1; line_ <= static_cast<int>(lines_.size()); ++line_)
        statement(lines_[line_ - 1]);
      line_ = static_cast<int>(lines_.size());
      if (!saw_output_) fail("missing the output line");
      if (std::string err = verify_graph(g_); !err.empty()) verifier_error(err);
      r.graph = std::move(g_);
    } catch (const SyntaxError& e) {
      r.error = "line " + std::to_string(line_) + ": " + e.msg;
    } catch (const std::overflow_error&) {
      r.error = "line " + std::to_string(line_) + ": integer overflow in a symbolic expression";
    } catch (const std::bad_alloc&) {
      r.error = "line " + std::to_string(line_) + ": out of memory";
    } catch (const std::exception& e) {
      r.error = "line " + std::to_string(line_) + ": " + e.what();
    }
    if (!r.ok()) r.graph = Graph{};
    return r;
  }

 private:
  void split_lines() {
    size_t start = 0;
    while (start <= text_.size()) {
      size_t nl = text_.find('\n', start);
      if (nl == std::string_view::npos) nl = text_.size();
      std::string_view l = text_.substr(start, nl - start);
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      lines_.push_back(l);
      start = nl + 1;
    }
    if (lines_.size() > 1 && lines_.back().empty()) lines_.pop_back();  // after a final newline
  }

  // Where each %name is defined, so that a forward reference reads "used before its definition".
  void prescan_definitions() {
    for (size_t i = 0; i < lines_.size(); ++i) {
      Cursor c(lines_[i]);
      try {
        c.accept_word("input");
        if (c.peek() != '%') continue;
        first_def_line_.emplace(c.value_name("a value"), static_cast<int>(i) + 1);
      } catch (const SyntaxError&) {
      }
    }
  }

  void statement(std::string_view text) {
    Cursor c(text);
    if (c.at_end()) return;
    if (saw_output_) fail("statement after the output line");
    bool first = !saw_statement_;
    saw_statement_ = true;
    if (c.accept_word("graph")) {
      if (!first) fail("the graph line must come first");
      c.expect('@', "before the graph name");
      g_.name = c.raw_word();
      if (g_.name.empty()) fail("expected a graph name after '@', found " + c.found());
    } else if (c.accept_word("sym")) {
      symbol(c);
    } else if (c.accept_word("input")) {
      input(c);
    } else if (c.accept_word("output")) {
      output(c);
    } else if (c.peek() == '%') {
      node(c);
    } else {
      fail("expected 'graph', 'sym', 'input', 'output' or a %value definition, found " + c.found());
    }
    if (!c.at_end()) fail("unexpected " + c.found() + " at the end of the statement");
  }

  // sym NAME in [LO, HI] div D     (LO may be -inf, HI may be inf; `div D` defaults to 1)
  void symbol(Cursor& c) {
    std::string name = c.ident("a symbol name");
    if (reserved_symbol_name(name)) fail("'" + name + "' cannot be a symbol name");
    if (syms_.count(name)) fail("symbol " + name + " declared twice");
    c.expect_word("in", "after the symbol name");
    c.expect('[', "to open the range");
    int64_t lo = bound(c, /*upper=*/false);
    c.expect(',', "in the range");
    int64_t hi = bound(c, /*upper=*/true);
    c.expect(']', "to close the range");
    int64_t div = 1;
    if (c.accept_word("div")) div = c.integer(false);
    if (lo > hi) fail("symbol " + name + " has an empty range");
    if (lo == hi)
      fail("symbol " + name + " has the single value " + std::to_string(lo) +
           "; write the constant instead");
    if (div < 1) fail("symbol " + name + " has a divisor below 1");
    SymExpr s = SymExpr::symbol(name, lo, hi, div);
    syms_.emplace(name, s);
    g_.symbols.push_back(s);
  }
  int64_t bound(Cursor& c, bool upper) {
    bool neg = c.accept('-');
    if (c.accept_word("inf")) {
      if (neg == upper)
        fail(upper ? "the upper bound cannot be -inf" : "the lower bound cannot be inf");
      return neg ? Interval::kNegInf : Interval::kPosInf;
    }
    return c.integer(neg);
  }

  // input %name: dtype[dims]   or   input %name: sym EXPR
  void input(Cursor& c) {
    std::string name = define(c);
    c.expect(':', "after the input name");
    Value v;
    if (c.accept_word("sym")) {
      v.kind = ValueKind::kSymInt;
      v.sym_value = expr(c);
    } else {
      v.type = tensor_type(c);
    }
    ValueId id = add_value(std::move(v), name);
    g_.inputs.push_back(id);
  }

  // output %a, %b, ...
  void output(Cursor& c) {
    do {
      ValueId id = use(c, "an output");
      if (g_.value(id).kind != ValueKind::kTensor)
        fail("output " + names_[id] + " is a symbolic integer; outputs are tensors");
      g_.outputs.push_back(id);
    } while (c.accept(','));
    saw_output_ = true;
  }

  // %name: dtype[dims] = op(%a, ...) {key = value, ...}
  void node(Cursor& c) {
    std::string name = define(c);
    c.expect(':', "after the value name");
    TensorType declared = tensor_type(c);
    c.expect('=', "after the result type");
    std::string op = c.ident("an op name");
    auto kind = op_from_name(op);
    if (!kind) fail("unknown op '" + op + "'");
    std::vector<ValueId> inputs;
    c.expect('(', "after the op name");
    if (!c.accept(')')) {
      do {
        if (inputs.size() == kMaxOperands)
          fail("more than " + std::to_string(kMaxOperands) + " operands");
        inputs.push_back(use(c, "an operand"));
      } while (c.accept(','));
      c.expect(')', "after the operands");
    }
    Attrs attrs;
    if (c.accept('{') && !c.accept('}')) {
      do {
        std::string key = c.ident("an attribute name");
        if (attrs.has(key)) fail("attribute " + key + " given twice");
        c.expect('=', "after the attribute name");
        attrs.set(key, attr_value(c));
      } while (c.accept(','));
      c.expect('}', "after the attributes");
    }
    InferResult inferred = infer_type(g_, *kind, inputs, attrs);
    if (!inferred.ok()) fail(inferred.error);
    if (inferred.type != declared)
      fail(name + " is declared " + declared.to_string() + " but " + op + " gives " +
           inferred.type.to_string());
    Value v;
    v.type = std::move(declared);
    v.producer = static_cast<int>(g_.nodes.size());
    ValueId id = add_value(std::move(v), name);
    g_.nodes.push_back(Node{*kind, std::move(inputs), std::move(attrs), id});
  }

  AttrValue attr_value(Cursor& c) {
    if (c.accept_word("sym")) {
      c.expect('[', "after 'sym'");
      std::vector<SymExpr> xs;
      if (!c.accept(']')) {
        do {
          xs.push_back(expr(c));
        } while (c.accept(','));
        c.expect(']', "to close the list");
      }
      return xs;
    }
    if (c.accept('[')) {
      std::vector<int64_t> xs;
      if (!c.accept(']')) {
        do {
          bool neg = c.accept('-');
          xs.push_back(c.integer(neg));
        } while (c.accept(','));
        c.expect(']', "to close the list");
      }
      return xs;
    }
    std::string_view w = c.peek_ident();
    if (!w.empty() && w != "inf" && w != "nan") {
      auto dtype = dtype_from_name(w);
      if (!dtype) fail("unknown attribute value '" + std::string(w) + "'");
      c.accept_word(w);
      return *dtype;
    }
    return c.number();
  }

  TensorType tensor_type(Cursor& c) {
    std::string name = c.ident("a dtype");
    auto dtype = dtype_from_name(name);
    if (!dtype) fail("unknown dtype '" + name + "'");
    TensorType t{*dtype, {}};
    c.expect('[', "after the dtype");
    if (c.accept(']')) return t;
    do {
      if (t.rank() >= limits_.max_rank)
        fail("rank above the limit " + std::to_string(limits_.max_rank));
      SymExpr d = expr(c);
      Interval b = d.bounds();
      if (b.lo < 0) fail("dimension " + d.to_string() + " may be negative");
      if (b.lo == Interval::kPosInf)
        fail("dimension " + d.to_string() + " exceeds the int64 range");
      t.shape.push_back(d);
    } while (c.accept(','));
    c.expect(']', "to close the shape");
    return t;
  }

  SymExpr expr(Cursor& c) { return text_parse::parse_expr(c, syms_); }

  // Reads the name of a value being defined; it must not be defined yet.
  std::string define(Cursor& c) {
    std::string name = c.value_name("a value name");
    if (auto it = values_.find(name); it != values_.end())
      fail(name + " is defined twice (first on line " + std::to_string(it->second.line) + ")");
    return name;
  }
  ValueId use(Cursor& c, std::string_view what) {
    std::string name = c.value_name(what);
    auto it = values_.find(name);
    if (it != values_.end()) return it->second.id;
    auto later = first_def_line_.find(name);
    if (later != first_def_line_.end() && later->second >= line_)
      fail(name + " is used before its definition on line " + std::to_string(later->second));
    fail(name + " is not defined");
  }
  ValueId add_value(Value v, const std::string& name) {
    if (g_.values.size() >= static_cast<size_t>(limits_.max_values))
      fail("too many values (limit " + std::to_string(limits_.max_values) + ")");
    ValueId id = static_cast<ValueId>(g_.values.size());
    g_.values.push_back(std::move(v));
    values_.emplace(name, ValueDef{id, line_});
    names_.push_back(name);
    return id;
  }

  // The verifier names values by id ("%7"); report the line that defines the first one named and
  // use the text's names.
  [[noreturn]] void verifier_error(const std::string& err) {
    std::string msg;
    int at = -1;
    for (size_t i = 0; i < err.size(); ++i) {
      if (err[i] != '%' || i + 1 >= err.size() || !is_digit(err[i + 1])) {
        msg += err[i];
        continue;
      }
      size_t e = i + 1;
      int64_t id = 0;
      while (e < err.size() && is_digit(err[e]) && id < (int64_t{1} << 40))
        id = id * 10 + (err[e++] - '0');
      if (id < static_cast<int64_t>(names_.size())) {
        msg += names_[id];
        if (at < 0) at = values_.at(names_[id]).line;
      } else {
        msg += err.substr(i, e - i);
      }
      i = e - 1;
    }
    if (at > 0) line_ = at;
    fail(msg);
  }

  std::string_view text_;
  std::vector<std::string_view> lines_;
  std::unordered_map<std::string, int> first_def_line_;
  std::unordered_map<std::string, ValueDef> values_;
  std::vector<std::string> names_;  // by ValueId
  SymbolTable syms_;
  VerifyLimits limits_;
  int line_ = 1;
  bool saw_output_ = false, saw_statement_ = false;
  Graph g_;
};

}  // namespace

ParseResult parse_graph_text(std::string_view text) { return GraphParser(text).run(); }

}  // namespace dg
