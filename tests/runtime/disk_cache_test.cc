// The disk cache across objects and processes, damaged entries, concurrent writers, and
// degrading to memory when the folder cannot be written.
//
// Note [Testing write failures as root]
// Tests run as root, for whom chmod does not make a folder unwritable. Real failures come from a
// folder whose parent is a regular file (ENOTDIR) and from a folder under /proc; failures at
// later steps (ENOSPC at write, EDQUOT at close, EROFS at rename) come from the test-only
// DiskCacheOptions::fault_for_testing hook, which fails one named step with a given errno.
#include "runtime/disk_cache.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "runtime/cache_admin.h"
#include "runtime/cache_entry.h"
#include "tests/common/file_bytes.h"
#include "tests/common/temp_dir.h"

namespace dg {
namespace {

using testing::TempDir;

DiskCacheOptions in(const std::string& dir, int* warnings = nullptr) {
  DiskCacheOptions o;
  o.dir = dir;
  if (warnings != nullptr) o.warn = [warnings](const std::string&) { ++*warnings; };
  return o;
}

size_t count_files(const std::string& dir, bool (*pred)(std::string_view)) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (pred(e.path().filename().string())) ++n;
  }
  return n;
}

// Runs `child` in a forked process; returns its exit status.
template <typename Fn>
pid_t spawn(Fn child) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  return pid;
}

int wait_status(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(DiskCache, RoundTripAndCounters) {
  TempDir t;
  DiskCache c(in(t.path()));
  EXPECT_FALSE(c.get("k"));
  ASSERT_TRUE(c.put("k", "binary").ok());
  EXPECT_EQ(c.get("k"), "binary");
  const CacheCounters n = c.counters();
  EXPECT_EQ(n.misses, 1u);
  EXPECT_EQ(n.memory_hits, 1u);
  EXPECT_EQ(n.disk_hits, 0u);
  EXPECT_EQ(n.writes, 1u);
  EXPECT_EQ(n.write_failures, 0u);
  EXPECT_EQ(n.corrupt_entries, 0u);
  EXPECT_TRUE(c.disk_writable());
  EXPECT_EQ(testing::read_all(t / entry_file_name("k")), encode_cache_entry("k", "binary"));
  EXPECT_FALSE(c.put("", "x").ok());
}

TEST(DiskCache, SecondObjectHitsDiskThenMemory) {
  TempDir t;
  ASSERT_TRUE(DiskCache(in(t.path())).put("k", std::string("\0cubin\0", 7)).ok());
  DiskCache c(in(t.path()));
  EXPECT_EQ(c.get("k"), std::string("\0cubin\0", 7));
  EXPECT_EQ(c.get("k"), std::string("\0cubin\0", 7));
  EXPECT_EQ(c.counters().disk_hits, 1u);
  EXPECT_EQ(c.counters().memory_hits, 1u);
  c.invalidate("k");
  EXPECT_TRUE(c.get("k"));
  EXPECT_EQ(c.counters().disk_hits, 2u);
}

TEST(DiskCache, ForkedProcessesShareEntries) {
  TempDir t;
  ASSERT_TRUE(DiskCache(in(t.path())).put("parent", "p").ok());
  const pid_t reader = spawn([&] {
    DiskCache c(in(t.path()));
    return c.get("parent") == "p" && c.counters().disk_hits == 1 ? 0 : 1;
  });
  EXPECT_EQ(wait_status(reader), 0);
  const pid_t writer =
      spawn([&] { return DiskCache(in(t.path())).put("child", "c").ok() ? 0 : 1; });
  EXPECT_EQ(wait_status(writer), 0);
  EXPECT_EQ(DiskCache(in(t.path())).get("child"), "c");
}

TEST(DiskCache, CorruptAndTruncatedEntriesAreMissesAndReplaced) {
  TempDir t;
  ASSERT_TRUE(DiskCache(in(t.path())).put("a", std::string(4096, 'a')).ok());
  ASSERT_TRUE(DiskCache(in(t.path())).put("b", std::string(4096, 'b')).ok());
  std::string a = testing::read_all(t / entry_file_name("a"));
  a[a.size() / 2] ^= 0x20;
  testing::write_all(t / entry_file_name("a"), a);
  std::filesystem::resize_file(t / entry_file_name("b"), 100);

  DiskCache c(in(t.path()));
  EXPECT_FALSE(c.get("a"));
  EXPECT_FALSE(c.get("b"));
  EXPECT_EQ(c.counters().corrupt_entries, 2u);
  EXPECT_EQ(c.counters().misses, 2u);
  // Still on disk (Note [Corrupt entries are not deleted on read]) until the next put.
  EXPECT_TRUE(std::filesystem::exists(t / entry_file_name("a")));
  ASSERT_TRUE(c.put("a", "fresh a").ok());
  ASSERT_TRUE(c.put("b", "fresh b").ok());

  DiskCache d(in(t.path()));
  EXPECT_EQ(d.get("a"), "fresh a");
  EXPECT_EQ(d.get("b"), "fresh b");
  EXPECT_EQ(d.counters().disk_hits, 2u);
  EXPECT_EQ(d.counters().corrupt_entries, 0u);
}

TEST(DiskCache, ForeignFilesAreIgnoredByGetAndReportedByVerify) {
  TempDir t;
  ASSERT_TRUE(DiskCache(in(t.path())).put("b", "bee").ok());
  testing::write_all(t / "notes.txt", "not ours");
  // An entry for key "b" sitting under key "a"'s name (copied by hand, say).
  std::filesystem::copy_file(t / entry_file_name("b"), t / entry_file_name("a"));

  DiskCache c(in(t.path()));
  EXPECT_FALSE(c.get("a"));
  EXPECT_FALSE(c.get("notes.txt"));
  EXPECT_EQ(c.get("b"), "bee");
  EXPECT_EQ(c.counters().corrupt_entries, 1u);

  Result<CacheVerifyReport> v = cache_verify(t.path(), false);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(v->valid, 1u);
  EXPECT_EQ(v->corrupt, 1u);
  ASSERT_EQ(v->corrupt_entries.size(), 1u);
  EXPECT_EQ(v->corrupt_entries[0].file, entry_file_name("a"));
  ASSERT_EQ(v->other_files.size(), 1u);
  EXPECT_EQ(v->other_files[0], "notes.txt");
}

TEST(DiskCache, ConcurrentProcessesPuttingOneKeyLeaveOneValidEntry) {
  TempDir t;
  const std::string payload(2 << 20, 'x');  // big enough for the writes to overlap
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    kids.push_back(spawn([&] {
      close(go[1]);
      char byte;
      if (read(go[0], &byte, 1) != 0) return 3;  // wait until the parent closes the pipe
      int warnings = 0;
      DiskCache c(in(t.path(), &warnings));
      if (!c.put("shared", payload).ok()) return 1;
      const CacheCounters n = c.counters();
      return n.writes == 1 && n.write_failures == 0 && warnings == 0 ? 0 : 2;
    }));
  }
  close(go[0]);
  close(go[1]);  // start them all at once
  for (pid_t k : kids) EXPECT_EQ(wait_status(k), 0);

  EXPECT_EQ(count_files(t.path(), is_entry_file_name), 1u);
  EXPECT_EQ(count_files(t.path(), is_temp_file_name), 0u);
  Result<CacheVerifyReport> v = cache_verify(t.path(), false);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->valid, 1u);
  EXPECT_EQ(v->corrupt, 0u);
  EXPECT_EQ(DiskCache(in(t.path())).get("shared"), payload);
}

TEST(DiskCache, ConcurrentThreadsInOneProcess) {
  TempDir t;
  DiskCache c(in(t.path()));
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&c, i] {
      for (int j = 0; j < 20; ++j) {
        const std::string key = "k" + std::to_string(j % 5);
        EXPECT_TRUE(c.put(key, key + "!").ok());
        auto v = c.get(key);
        EXPECT_TRUE(v && *v == key + "!");
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(count_files(t.path(), is_entry_file_name), 5u);
  EXPECT_EQ(count_files(t.path(), is_temp_file_name), 0u);
  EXPECT_EQ(c.counters().write_failures, 0u);
}

// Puts several entries into a cache whose folder cannot be written; expects one warning.
void expect_memory_fallback(DiskCache& c, const int& warnings) {
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(c.put("k" + std::to_string(i), "v").ok());
  }
  EXPECT_EQ(warnings, 1);
  EXPECT_FALSE(c.disk_writable());
  EXPECT_EQ(c.counters().write_failures, 1u);
  EXPECT_EQ(c.counters().writes, 0u);
  EXPECT_EQ(c.get("k3"), "v");
  EXPECT_EQ(c.counters().memory_hits, 1u);
}

TEST(DiskCache, FolderUnderARegularFileFallsBackToMemory) {
  TempDir t;
  testing::write_all(t / "file", "x");
  int warnings = 0;
  DiskCache c(in(t / "file/cache", &warnings));
  expect_memory_fallback(c, warnings);
}

TEST(DiskCache, FolderUnderProcFallsBackToMemory) {
  int warnings = 0;
  DiskCache c(in("/proc/dyngen-kernel-cache", &warnings));
  expect_memory_fallback(c, warnings);
}

class InjectedFault : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(InjectedFault, FallsBackToMemoryAndLeavesNoTemporaries) {
  TempDir t;
  int warnings = 0;
  std::string warning;
  DiskCacheOptions o = in(t.path());
  o.warn = [&](const std::string& w) {
    ++warnings;
    warning = w;
  };
  const auto [step, err] = GetParam();
  o.fault_for_testing = [step = std::string(step), err = err](std::string_view s) {
    return s == step ? err : 0;
  };
  DiskCache c(o);
  expect_memory_fallback(c, warnings);
  EXPECT_NE(warning.find(std::strerror(err)), std::string::npos) << warning;
  EXPECT_NE(warning.find(t.path()), std::string::npos) << warning;
  EXPECT_EQ(count_files(t.path(), is_temp_file_name), 0u);
  EXPECT_EQ(count_files(t.path(), is_entry_file_name), 0u);
}

INSTANTIATE_TEST_SUITE_P(Steps, InjectedFault,
                         ::testing::Values(std::pair{"mkdir", EACCES}, std::pair{"open", EROFS},
                                           std::pair{"write", ENOSPC}, std::pair{"close", EDQUOT},
                                           std::pair{"rename", EROFS}),
                         [](const auto& info) { return std::string(info.param.first); });

TEST(DiskCache, ReadOnlyFolderStillServesHits) {
  TempDir t;
  ASSERT_TRUE(DiskCache(in(t.path())).put("old", "from CI").ok());
  int warnings = 0;
  DiskCacheOptions o = in(t.path(), &warnings);
  o.fault_for_testing = [](std::string_view s) { return s == "open" ? EROFS : 0; };
  DiskCache c(o);
  EXPECT_EQ(c.get("old"), "from CI");
  EXPECT_TRUE(c.put("new", "n").ok());
  EXPECT_EQ(c.get("old"), "from CI");
  EXPECT_EQ(c.counters().disk_hits, 1u);
  EXPECT_EQ(warnings, 1);
}

TEST(DiskCache, DefaultWarningGoesToStderrOnce) {
  TempDir t;
  testing::write_all(t / "file", "x");
  ::testing::internal::CaptureStderr();
  {
    DiskCache c(in(t / "file/cache"));
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(c.put("k" + std::to_string(i), "v").ok());
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("memory only"), std::string::npos) << err;
}

TEST(DiskCache, RecreatesAFolderRemovedUnderIt) {
  TempDir t;
  int warnings = 0;
  DiskCache c(in(t / "a/b/cache", &warnings));
  ASSERT_TRUE(c.put("k1", "1").ok());
  std::filesystem::remove_all(t / "a");
  ASSERT_TRUE(c.put("k2", "2").ok());
  EXPECT_EQ(warnings, 0);
  EXPECT_EQ(c.counters().writes, 2u);
  EXPECT_EQ(DiskCache(in(t / "a/b/cache")).get("k2"), "2");
}

TEST(DiskCache, MemoryOnlyByOption) {
  TempDir t;
  DiskCacheOptions o = in(t / "cache");
  o.use_disk = false;
  DiskCache c(o);
  ASSERT_TRUE(c.put("k", "v").ok());
  EXPECT_EQ(c.get("k"), "v");
  EXPECT_FALSE(std::filesystem::exists(t / "cache"));
  EXPECT_FALSE(c.disk_writable());
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DiskCache, DefaultFolderFromEnvironment) {
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv dir("DYNGEN_CACHE_DIR", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    EXPECT_EQ(default_cache_dir(), "/home/someone/.cache/dyngen");
    ScopedEnv xdg2("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(default_cache_dir(), "/xdg/dyngen");
    ScopedEnv dir2("DYNGEN_CACHE_DIR", "/ci/kernels");
    EXPECT_EQ(default_cache_dir(), "/ci/kernels");
    EXPECT_EQ(DiskCache().dir(), "/ci/kernels");
  }
}

}  // namespace
}  // namespace dg
