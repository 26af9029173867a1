#include "runtime/json_text.h"

namespace dg {

// Note [JSON output]
// JSON is built as nlohmann::ordered_json, never by concatenating text, so every output is valid
// JSON by construction. ordered_json keeps the fields in the order the code sets them (a report
// reads top-down, as before the library, rather than alphabetically). Each output is one compact
// line, so a caller can take the last line of a run's output. A string that is not UTF-8 (a
// path is only bytes on Linux) has its bad bytes replaced by U+FFFD: nlohmann's default is to
// throw, which would turn a report about an odd folder name into an internal error.
std::string json_text(const Json& j) {
  return j.dump(/*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
                Json::error_handler_t::replace);
}

}  // namespace dg
