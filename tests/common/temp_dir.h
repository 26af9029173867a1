// Temporary folders for tests: a fresh one that is removed afterwards, and the cache folder that
// the processes of one test run share (ctest runs each case as its own process; a shared folder
// compiles each graph once per run).
#pragma once
#include <filesystem>
#include <string>

namespace dg::testing {

// A new, empty folder under the system's temporary folder (mkdtemp), removed with all it holds
// when the object goes.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "dg_test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// <temporary folder>/NAME, left in place: the kernel cache that every case of a test binary
// shares, so that only the first case to need a module compiles it.
std::string shared_cache_dir(const std::string& name);
// $DYNGEN_CACHE_DIR when set (scripts/test.sh points it at the test run's cache), else
// shared_cache_dir(name): for tests of numerics or code, not of cache behaviour.
std::string run_cache_dir(const std::string& name);

}  // namespace dg::testing
