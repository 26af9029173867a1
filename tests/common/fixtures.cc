#include "tests/common/fixtures.h"

#include <gtest/gtest.h>

#include <regex>

#include "ir/text_format.h"

namespace dg::testing {

Graph parse_or_fail(const std::string& text) {
  ParseResult r = parse_graph_text(text);
  EXPECT_TRUE(r.ok()) << r.error;
  return r.graph;
}

Graph load_fixture(const std::string& name) { return parse_or_fail(fixture_text(name)); }

std::string replace_in_shapes(const std::string& text,
                              const std::vector<std::pair<std::string, std::string>>& from_to) {
  std::string out;
  std::regex shape(R"(\[[^\]]*\])");
  size_t last = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), shape), end; it != end; ++it) {
    out += text.substr(last, it->position() - last);
    std::string dims = it->str();
    for (const auto& [from, to] : from_to)
      dims = std::regex_replace(dims, std::regex("\\b" + from + "\\b"), to);
    out += dims;
    last = it->position() + it->length();
  }
  return out + text.substr(last);
}

std::string resized_seed_text(const std::string& fixture, int64_t hidden, int64_t ffn,
                              int64_t rank) {
  return replace_in_shapes(fixture_text(fixture), {{"2048", "H"},
                                                   {"1024", "F"},
                                                   {"16", std::to_string(rank)},
                                                   {"H", std::to_string(hidden)},
                                                   {"F", std::to_string(ffn)}});
}

Graph resized_seed(const std::string& fixture, int64_t hidden, int64_t ffn, int64_t rank) {
  std::string text =
      std::regex_replace(resized_seed_text(fixture, hidden, ffn, rank),
                         std::regex(R"(sym s77 in \[[^\]]*\])"), "sym s77 in [0, inf]");
  return parse_or_fail(text);
}

}  // namespace dg::testing
