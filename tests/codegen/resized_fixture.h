// Test helper: the graph fixtures of tests/fixtures as text, and the seed's expert graphs at other
// sizes (hidden, ffn, LoRA rank), for the numerics tests of every code path.
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "ir/text_format.h"

namespace dg {

inline std::string fixture_text(const std::string& name) {
  std::ifstream f(std::string(DG_FIXTURES_DIR) + "/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A seed fixture (the forward or the backward) with other sizes: hidden, ffn and LoRA rank replace
// 2048, 1024 and 16 inside shapes (the scaling 2.0 = alpha / r stays). The symbol's range is
// widened to [0, inf] (Dynamo specializes 0 and 1, the issue asks for them too).
inline Graph resized_seed(const std::string& fixture, int64_t hidden, int64_t ffn, int64_t rank) {
  std::string text = fixture_text(fixture);
  std::string out;
  std::regex shape(R"(\[[^\]]*\])");
  std::sregex_iterator it(text.begin(), text.end(), shape), end;
  size_t last = 0;
  for (; it != end; ++it) {
    out += text.substr(last, it->position() - last);
    std::string s = it->str();
    s = std::regex_replace(s, std::regex(R"(\b2048\b)"), "H");
    s = std::regex_replace(s, std::regex(R"(\b1024\b)"), "F");
    s = std::regex_replace(s, std::regex(R"(\b16\b)"), std::to_string(rank));
    s = std::regex_replace(s, std::regex(R"(\bH\b)"), std::to_string(hidden));
    s = std::regex_replace(s, std::regex(R"(\bF\b)"), std::to_string(ffn));
    out += s;
    last = it->position() + it->length();
  }
  out += text.substr(last);
  out = std::regex_replace(out, std::regex(R"(sym s77 in \[[^\]]*\])"), "sym s77 in [0, inf]");
  ParseResult r = parse_graph_text(out);
  EXPECT_TRUE(r.ok()) << r.error;
  return r.graph;
}

}  // namespace dg
