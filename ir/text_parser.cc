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
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/shape_infer.h"
#include "ir/sym_node.h"
#include "ir/text_format.h"
#include "ir/verifier.h"

namespace dg {
namespace {

constexpr size_t kMaxTextBytes = size_t{64} << 20;
constexpr int kMaxExprDepth = 64;
constexpr int kMaxExprOps = 4096;     // operators in one expression
constexpr size_t kMaxExprSize = 256;  // terms + factors of any intermediate canonical form
constexpr size_t kMaxOperands = 4096;

struct SyntaxError {
  std::string msg;
};
[[noreturn]] void fail(std::string msg) { throw SyntaxError{std::move(msg)}; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
bool is_name_char(char c) { return is_ident_char(c) || c == '.' || c == '-'; }

// A character cursor over one line; '#' starts a comment that runs to the end of the line.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}

  void skip_ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t')) ++p_;
    if (p_ < s_.size() && s_[p_] == '#') p_ = s_.size();
  }
  bool at_end() {
    skip_ws();
    return p_ == s_.size();
  }
  char peek() {
    skip_ws();
    return p_ < s_.size() ? s_[p_] : '\0';
  }
  char peek_raw() const { return p_ < s_.size() ? s_[p_] : '\0'; }
  bool accept(char c) {
    if (peek() != c || p_ >= s_.size()) return false;
    ++p_;
    return true;
  }
  void expect(char c, std::string_view context) {
    if (!accept(c))
      fail("expected '" + std::string(1, c) + "' " + std::string(context) + ", found " + found());
  }
  // The next token as a word of identifier characters (not consumed when it does not match).
  std::string_view peek_ident() {
    skip_ws();
    if (p_ >= s_.size() || !is_ident_start(s_[p_])) return {};
    size_t e = p_;
    while (e < s_.size() && is_ident_char(s_[e])) ++e;
    return s_.substr(p_, e - p_);
  }
  bool accept_word(std::string_view w) {
    if (peek_ident() != w || w.empty()) return false;
    p_ += w.size();
    return true;
  }
  void expect_word(std::string_view w, std::string_view context) {
    if (!accept_word(w))
      fail("expected '" + std::string(w) + "' " + std::string(context) + ", found " + found());
  }
  std::string ident(std::string_view what) {
    std::string_view w = peek_ident();
    if (w.empty()) fail("expected " + std::string(what) + ", found " + found());
    p_ += w.size();
    return std::string(w);
  }
  // Letters, digits, '_', '.' and '-', right at the cursor.
  std::string raw_name() {
    size_t e = p_;
    while (e < s_.size() && is_name_char(s_[e])) ++e;
    std::string name(s_.substr(p_, e - p_));
    p_ = e;
    return name;
  }
  // Printable characters up to a space or '#', right at the cursor.
  std::string raw_word() {
    size_t e = p_;
    while (e < s_.size() && static_cast<unsigned char>(s_[e]) > 0x20 && s_[e] != '#' &&
           s_[e] != 0x7f)
      ++e;
    std::string word(s_.substr(p_, e - p_));
    p_ = e;
    return word;
  }
  // `%name`, where a name is letters, digits, '_', '.' and '-'.
  std::string value_name(std::string_view what) {
    if (peek() != '%') fail("expected " + std::string(what) + " (a %name), found " + found());
    ++p_;
    std::string name = raw_name();
    if (name.empty()) fail("expected a value name after '%', found " + found());
    return "%" + name;
  }
  // Decimal digits as a magnitude; `negate` allows 2^63 (INT64_MIN).
  int64_t integer(bool negate) {
    skip_ws();
    if (!is_digit(peek_raw())) fail("expected an integer, found " + found());
    uint64_t limit = negate ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1, v = 0;
    size_t start = p_;
    while (is_digit(peek_raw())) {
      uint64_t d = static_cast<uint64_t>(s_[p_++] - '0');
      if (v > (limit - d) / 10) {
        while (is_digit(peek_raw())) ++p_;
        fail("integer literal " + std::string(negate ? "-" : "") +
             std::string(s_.substr(start, p_ - start)) + " is out of range");
      }
      v = v * 10 + d;
    }
    if (!negate) return static_cast<int64_t>(v);
    return v == (uint64_t{1} << 63) ? Interval::kNegInf : -static_cast<int64_t>(v);
  }
  // A number token: integer, or float when it has '.', an exponent, or is inf / nan.
  AttrValue number() {
    skip_ws();
    size_t start = p_;
    bool neg = peek_raw() == '-';
    if (neg) ++p_;
    if (accept_word("inf")) return neg ? -HUGE_VAL : HUGE_VAL;
    if (!neg && accept_word("nan")) return std::numeric_limits<double>::quiet_NaN();
    size_t digits = p_;
    while (is_digit(peek_raw())) ++p_;
    bool is_float = false;
    if (peek_raw() == '.') {
      is_float = true;
      ++p_;
      while (is_digit(peek_raw())) ++p_;
    }
    if (p_ > digits && (peek_raw() == 'e' || peek_raw() == 'E')) {
      is_float = true;
      ++p_;
      if (peek_raw() == '+' || peek_raw() == '-') ++p_;
      if (!is_digit(peek_raw()))
        fail("malformed number " + std::string(s_.substr(start, p_ - start)));
      while (is_digit(peek_raw())) ++p_;
    }
    std::string tok(s_.substr(start, p_ - start));
    if (p_ == digits || (is_float && !is_digit(s_[digits]))) fail("malformed number " + tok);
    if (!is_float) {
      p_ = digits;
      return integer(neg);
    }
    errno = 0;
    double d = std::strtod(tok.c_str(), nullptr);
    if (errno == ERANGE && std::isinf(d)) fail("float literal " + tok + " is out of range");
    return d;
  }
  std::string found() {
    skip_ws();
    if (p_ >= s_.size()) return "end of line";
    unsigned char c = static_cast<unsigned char>(s_[p_]);
    if (c >= 0x21 && c < 0x7f) {
      size_t e = p_ + 1;
      if (is_ident_char(s_[p_]))
        while (e < s_.size() && is_ident_char(s_[e]) && e - p_ < 32) ++e;
      return "'" + std::string(s_.substr(p_, e - p_)) + "'";
    }
    char buf[16];
    std::snprintf(buf, sizeof(buf), "byte 0x%02x", c);
    return buf;
  }

 private:
  std::string_view s_;
  size_t p_ = 0;
};

using SymbolTable = std::map<std::string, SymExpr, std::less<>>;

// Symbolic expressions: sum := term (('+' | '-') term)*, term := unary ('*' unary)*,
// unary := '-' unary | integer | primary, primary := symbol | '(' sum ')' | fn '(' sum ',' sum ')'.
// A '-' is pushed down to the first factor, so that negated literals may reach INT64_MIN.
// Products of sums expand, so the size of every intermediate result is bounded.
class ExprParser {
 public:
  ExprParser(Cursor& c, const SymbolTable& syms) : c_(c), syms_(syms) {}

  SymExpr sum(int depth) {
    SymExpr r = term(depth, false);
    for (;;) {
      if (c_.accept('+'))
        r = bounded(r + term(depth, false));
      else if (c_.accept('-'))
        r = bounded(r + term(depth, true));
      else
        return r;
    }
  }

 private:
  void deeper(int depth) {
    if (depth > kMaxExprDepth)
      fail("expression nested deeper than " + std::to_string(kMaxExprDepth) + " levels");
  }
  SymExpr bounded(SymExpr e) {
    if (++ops_ > kMaxExprOps)
      fail("expression has more than " + std::to_string(kMaxExprOps) + " operators");
    const SymNode* n = e.node();
    size_t size = 1;
    for (auto& [coef, mono] : n->terms)
      size += 1 + (mono->kind == SymKind::kProduct ? mono->factors.size() : 0);
    size += n->factors.size();
    if (size > kMaxExprSize)
      fail("expression grows past " + std::to_string(kMaxExprSize) + " terms and factors");
    return e;
  }
  SymExpr term(int depth, bool negate) {
    SymExpr r = unary(depth, negate);
    while (c_.accept('*')) r = bounded(r * unary(depth, false));
    return r;
  }
  SymExpr unary(int depth, bool negate) {
    if (c_.accept('-')) {
      deeper(depth + 1);
      return unary(depth + 1, !negate);
    }
    c_.skip_ws();
    if (is_digit(c_.peek_raw())) return SymExpr(c_.integer(negate));
    SymExpr p = primary(depth);
    return negate ? -p : p;
  }
  SymExpr primary(int depth) {
    if (c_.accept('(')) {
      deeper(depth + 1);
      SymExpr r = sum(depth + 1);
      c_.expect(')', "to close '('");
      return r;
    }
    std::string name = c_.ident("an expression");
    if (c_.accept('(')) {
      deeper(depth + 1);
      using Fn = SymExpr (*)(const SymExpr&, const SymExpr&);
      static const std::map<std::string, Fn, std::less<>> kFns = {
          {"floordiv", floordiv}, {"mod", mod}, {"max", max}, {"min", min}};
      auto fn = kFns.find(name);
      if (fn == kFns.end()) fail("unknown function '" + name + "'");
      SymExpr a = sum(depth + 1);
      c_.expect(',', "between the arguments of " + name);
      SymExpr b = sum(depth + 1);
      c_.expect(')', "to close " + name + "(");
      if ((fn->second == floordiv || fn->second == mod) && b == SymExpr(0)) fail(name + " by zero");
      return bounded(fn->second(a, b));
    }
    auto it = syms_.find(name);
    if (it == syms_.end()) fail("undeclared symbol '" + name + "' (declare it with a sym line)");
    return it->second;
  }

  Cursor& c_;
  const SymbolTable& syms_;
  int ops_ = 0;
};

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

  SymExpr expr(Cursor& c) { return ExprParser(c, syms_).sum(0); }

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
