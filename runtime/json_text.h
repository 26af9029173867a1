// The one JSON writer behind every `--json` output and dg_executable_describe: values are built as
// nlohmann::ordered_json and written by json_text (Note [JSON output]).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace dg {

using Json = nlohmann::ordered_json;

// `j` as one line of JSON (no trailing newline).
std::string json_text(const Json& j);

}  // namespace dg
