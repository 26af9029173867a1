// Test helper: the graph fixtures of tests/fixtures as text, resized by rewriting the numbers in
// their shapes (replace_in_shapes), and the seed's expert graphs at other sizes (hidden, ffn, LoRA
// rank), for the numerics tests of every code path.
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ir/text_format.h"

namespace dg {

inline std::string fixture_text(const std::string& name) {
  std::ifstream f(std::string(DG_FIXTURES_DIR) + "/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// `text` with every whole number `from` inside a shape's brackets replaced by `to`, the pairs
// applied in order (a size that is also another's new value goes through a placeholder first).
inline std::string replace_in_shapes(
    const std::string& text, const std::vector<std::pair<std::string, std::string>>& from_to) {
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

// A seed fixture (the forward or the backward) with other sizes: hidden, ffn and LoRA rank replace
// 2048, 1024 and 16 inside shapes (the scaling 2.0 = alpha / r stays). The symbol's range is
// widened to [0, inf] (Dynamo specializes 0 and 1, the issue asks for them too).
inline Graph resized_seed(const std::string& fixture, int64_t hidden, int64_t ffn, int64_t rank) {
  std::string out = replace_in_shapes(fixture_text(fixture), {{"2048", "H"},
                                                              {"1024", "F"},
                                                              {"16", std::to_string(rank)},
                                                              {"H", std::to_string(hidden)},
                                                              {"F", std::to_string(ffn)}});
  out = std::regex_replace(out, std::regex(R"(sym s77 in \[[^\]]*\])"), "sym s77 in [0, inf]");
  ParseResult r = parse_graph_text(out);
  EXPECT_TRUE(r.ok()) << r.error;
  return r.graph;
}

}  // namespace dg
