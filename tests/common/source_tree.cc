#include "tests/common/source_tree.h"

#include "tests/common/file_bytes.h"

namespace dg::testing {

std::string repo_path(const std::string& relative) {
  return std::string(DG_SOURCE_DIR) + "/" + relative;
}

std::string fixture_path(const std::string& name) { return repo_path("tests/fixtures/" + name); }

std::string fixture_text(const std::string& name) { return read_all(fixture_path(name)); }

}  // namespace dg::testing
