// The JSON a `dyngen ... --json` child printed, parsed with nlohmann: text that is not JSON throws
// nlohmann::json::parse_error, so a test that reads the output also checks that it is JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "tests/common/cli_process.h"

namespace dg::testing {

// From the first '{' to the end (run_cli merges stderr, whose lines come first if there are any).
inline nlohmann::json cli_json(const CliResult& r) {
  size_t brace = r.out.find('{');
  if (brace == std::string::npos) throw std::runtime_error("no JSON in: " + r.out);
  return nlohmann::json::parse(r.out.substr(brace));
}

}  // namespace dg::testing
