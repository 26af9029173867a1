#include "tests/driver_double/ptx_entries.h"

#include <cctype>
#include <cstdlib>

namespace dg::driver_double {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Bytes of a PTX fundamental type (".u64" -> 8), 0 if `t` is not one.
size_t type_size(std::string_view t) {
  if (t.size() < 3 || t[0] != '.') return 0;
  char kind = t[1];
  if (kind != 'u' && kind != 's' && kind != 'b' && kind != 'f') return 0;
  int bits = std::atoi(std::string(t.substr(2)).c_str());
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64) return 0;
  return static_cast<size_t>(bits / 8);
}

// One declaration such as ".param .u64 .ptr .align 1 k_param_0" or
// ".param .align 8 .b8 k_param_1[16]".
bool parse_param(std::string_view decl, PtxParam* out) {
  size_t scalar = 0, align = 0, count = 1;
  size_t at = 0;
  while (at < decl.size()) {
    while (at < decl.size() && std::isspace(static_cast<unsigned char>(decl[at]))) ++at;
    size_t end = at;
    while (end < decl.size() && !std::isspace(static_cast<unsigned char>(decl[end]))) ++end;
    std::string_view word = decl.substr(at, end - at);
    at = end;
    if (word.empty()) break;
    if (word == ".align") {
      while (at < decl.size() && std::isspace(static_cast<unsigned char>(decl[at]))) ++at;
      align = static_cast<size_t>(std::atoi(std::string(decl.substr(at)).c_str()));
      while (at < decl.size() && !std::isspace(static_cast<unsigned char>(decl[at]))) ++at;
    } else if (size_t s = type_size(word)) {
      scalar = s;
    } else if (size_t open = word.find('['); open != std::string_view::npos) {
      count = static_cast<size_t>(std::atoll(std::string(word.substr(open + 1)).c_str()));
    }
  }
  if (scalar == 0 || count == 0) return false;
  out->size = scalar * count;
  out->align = align ? align : scalar;
  return true;
}

}  // namespace

bool parse_ptx(std::string_view ptx, PtxImage* out, std::string* error) {
  size_t line_start = 0;
  while (line_start < ptx.size()) {
    size_t line_end = ptx.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = ptx.size();
    std::string_view line = trim(ptx.substr(line_start, line_end - line_start));
    if (line.rfind(".target", 0) == 0) {
      std::string_view t = trim(line.substr(7));
      out->target = std::string(t.substr(0, t.find_first_of(", \t")));
    } else if (line.rfind(".file", 0) == 0) {
      size_t q1 = line.find('"'), q2 = line.rfind('"');
      if (q1 != std::string_view::npos && q2 > q1)
        out->files.emplace_back(line.substr(q1 + 1, q2 - q1 - 1));
    }
    size_t entry = line.find(".entry ");
    if (entry != std::string_view::npos && line.find("//") > entry) {
      size_t name_at = entry + 7;
      size_t open = ptx.find('(', static_cast<size_t>(line.data() - ptx.data()) + name_at);
      std::string_view name_part = line.substr(name_at);
      PtxEntry e;
      e.name = std::string(trim(name_part.substr(0, name_part.find('('))));
      if (e.name.empty() || open == std::string_view::npos) {
        *error = "unreadable .entry line: " + std::string(line);
        return false;
      }
      size_t close = ptx.find(')', open);
      if (close == std::string_view::npos) {
        *error = ".entry " + e.name + " has no closing parenthesis";
        return false;
      }
      std::string_view list = ptx.substr(open + 1, close - open - 1);
      size_t at = 0;
      while (at < list.size()) {
        size_t comma = list.find(',', at);
        if (comma == std::string_view::npos) comma = list.size();
        std::string_view decl = trim(list.substr(at, comma - at));
        at = comma + 1;
        if (decl.empty()) continue;
        PtxParam p;
        if (!parse_param(decl, &p)) {
          *error = ".entry " + e.name + ": unreadable parameter '" + std::string(decl) + "'";
          return false;
        }
        e.params.push_back(p);
      }
      out->entries.push_back(std::move(e));
      line_end = close;
    }
    line_start = line_end + 1;
  }
  return true;
}

}  // namespace dg::driver_double
