#include "ir/text_cursor.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "ir/sym_expr.h"

namespace dg::text_parse {

void Cursor::skip_ws() {
  while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t')) ++p_;
  if (p_ < s_.size() && s_[p_] == '#') p_ = s_.size();
}

bool Cursor::at_end() {
  skip_ws();
  return p_ == s_.size();
}

char Cursor::peek() {
  skip_ws();
  return p_ < s_.size() ? s_[p_] : '\0';
}

bool Cursor::accept(char c) {
  if (peek() != c || p_ >= s_.size()) return false;
  ++p_;
  return true;
}

void Cursor::expect(char c, std::string_view context) {
  if (!accept(c))
    fail("expected '" + std::string(1, c) + "' " + std::string(context) + ", found " + found());
}

std::string_view Cursor::peek_ident() {
  skip_ws();
  if (p_ >= s_.size() || !is_ident_start(s_[p_])) return {};
  size_t e = p_;
  while (e < s_.size() && is_ident_char(s_[e])) ++e;
  return s_.substr(p_, e - p_);
}

bool Cursor::accept_word(std::string_view w) {
  if (peek_ident() != w || w.empty()) return false;
  p_ += w.size();
  return true;
}

void Cursor::expect_word(std::string_view w, std::string_view context) {
  if (!accept_word(w))
    fail("expected '" + std::string(w) + "' " + std::string(context) + ", found " + found());
}

std::string Cursor::ident(std::string_view what) {
  std::string_view w = peek_ident();
  if (w.empty()) fail("expected " + std::string(what) + ", found " + found());
  p_ += w.size();
  return std::string(w);
}

std::string Cursor::raw_name() {
  size_t e = p_;
  while (e < s_.size() && is_name_char(s_[e])) ++e;
  std::string name(s_.substr(p_, e - p_));
  p_ = e;
  return name;
}

std::string Cursor::raw_word() {
  size_t e = p_;
  while (e < s_.size() && static_cast<unsigned char>(s_[e]) > 0x20 && s_[e] != '#' && s_[e] != 0x7f)
    ++e;
  std::string word(s_.substr(p_, e - p_));
  p_ = e;
  return word;
}

std::string Cursor::value_name(std::string_view what) {
  if (peek() != '%') fail("expected " + std::string(what) + " (a %name), found " + found());
  ++p_;
  std::string name = raw_name();
  if (name.empty()) fail("expected a value name after '%', found " + found());
  return "%" + name;
}

int64_t Cursor::integer(bool negate) {
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

AttrValue Cursor::number() {
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

std::string Cursor::found() {
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

}  // namespace dg::text_parse
