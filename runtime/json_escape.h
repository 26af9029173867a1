// JSON string quoting, shared by every `--json` output.
#pragma once
#include <string>
#include <string_view>

namespace dg {

// `s` as a quoted JSON string (control characters escaped).
std::string json_escape(std::string_view s);

}  // namespace dg
