#include "tests/common/temp_dir.h"

#include <stdlib.h>

#include <cstdlib>
#include <system_error>

namespace dg::testing {

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
  path_ = ::mkdtemp(pattern.data()) ? pattern : std::string();
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string shared_cache_dir(const std::string& name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

std::string run_cache_dir(const std::string& name) {
  if (const char* d = std::getenv("DYNGEN_CACHE_DIR")) return d;
  return shared_cache_dir(name);
}

}  // namespace dg::testing
