// The lexical layer of the text-form parser (ir/text_parser.cc): a cursor over one line that reads
// names, integers and numbers, and says what it found when something else was expected. Failures
// throw SyntaxError, which the graph parser turns into "line N: message" (Note [Text parser
// robustness] in ir/text_parser.cc).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ir/attrs.h"

namespace dg::text_parse {

struct SyntaxError {
  std::string msg;
};
[[noreturn]] inline void fail(std::string msg) { throw SyntaxError{std::move(msg)}; }

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
inline bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
inline bool is_name_char(char c) { return is_ident_char(c) || c == '.' || c == '-'; }

// A character cursor over one line; '#' starts a comment that runs to the end of the line.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  void skip_ws();
  bool at_end();
  char peek();
  char peek_raw() const { return p_ < s_.size() ? s_[p_] : '\0'; }
  bool accept(char c);
  void expect(char c, std::string_view context);
  // The next token as a word of identifier characters (not consumed when it does not match).
  std::string_view peek_ident();
  bool accept_word(std::string_view w);
  void expect_word(std::string_view w, std::string_view context);
  // An identifier; `what` names what was expected when there is none.
  std::string ident(std::string_view what);
  // Letters, digits, '_', '.' and '-', right at the cursor.
  std::string raw_name();
  // Printable characters up to a space or '#', right at the cursor.
  std::string raw_word();
  // `%name`, where a name is letters, digits, '_', '.' and '-'.
  std::string value_name(std::string_view what);
  // Decimal digits as a magnitude; `negate` allows 2^63 (INT64_MIN).
  int64_t integer(bool negate);
  // A number token: integer, or float when it has '.', an exponent, or is inf / nan.
  AttrValue number();
  // What is at the cursor, for an error message: a short token, "end of line" or a byte.
  std::string found();

 private:
  std::string_view s_;
  size_t p_ = 0;
};

}  // namespace dg::text_parse
