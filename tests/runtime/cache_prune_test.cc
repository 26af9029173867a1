// Bounding the kernel cache: `dyngen cache prune` (least recently used first, a hit refreshes an
// entry, never a partial entry), the per-architecture stats, and the stored key's form.
#include "runtime/cache_prune.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <ctime>
#include <sstream>

#include "frontends/cli/cache_command.h"
#include "runtime/cache_admin.h"
#include "runtime/cache_entry.h"
#include "runtime/cache_key.h"
#include "runtime/disk_cache.h"
#include "tests/common/file_bytes.h"
#include "tests/common/temp_dir.h"

namespace dg {
namespace {

using testing::TempDir;

std::string key_for(const std::string& arch, const std::string& compiler, const std::string& src) {
  return kernel_cache_key(KernelKeyParts{"0.1.0", arch, compiler, std::string(64, 'a'), src});
}

// Sets an entry's modification time (the "last used" time prune reads) to `t`.
void set_mtime(const std::string& path, int64_t t) {
  struct timespec times[2] = {{static_cast<time_t>(t), 0}, {static_cast<time_t>(t), 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

int64_t mtime(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_mtime) : -1;
}

std::string run(std::vector<std::string> args, int* code) {
  std::ostringstream out, err;
  *code = run_cache_command(args, out, err);
  return out.str() + err.str();
}

TEST(CacheKey, RoundTripsAndRejectsOtherForms) {
  KernelKeyParts p{"0.1.0", "sm_90a", "nvrtc 12.8", "h", "s"};
  KernelKeyParts back;
  ASSERT_TRUE(parse_kernel_cache_key(kernel_cache_key(p), &back));
  EXPECT_EQ(back.arch, "sm_90a");
  EXPECT_EQ(back.compiler, "nvrtc 12.8");
  EXPECT_EQ(back.version, "0.1.0");
  EXPECT_FALSE(parse_kernel_cache_key("one", &back));
  EXPECT_FALSE(parse_kernel_cache_key(kernel_cache_key(p) + "\nextra x", &back));
}

TEST(CacheKey, HopperDevicesUseTheArchACpuMachinePrebuildsFor) {
  EXPECT_EQ(arch_for_compute_capability(90), "sm_90a");  // H100, H200
  EXPECT_EQ(arch_for_compute_capability(80), "sm_80");
  EXPECT_EQ(arch_for_compute_capability(89), "sm_89");
}

TEST(CachePrune, ParsesSizes) {
  EXPECT_EQ(parse_byte_size("123"), 123u);
  EXPECT_EQ(parse_byte_size("64K"), 64u << 10);
  EXPECT_EQ(parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("2g"), 2ull << 30);
  EXPECT_FALSE(parse_byte_size(""));
  EXPECT_FALSE(parse_byte_size("-1"));
  EXPECT_FALSE(parse_byte_size("12Q"));
  EXPECT_FALSE(parse_byte_size("99999999999999999999"));
}

// Five entries of 1000-byte payloads used at times 100..500; a disk hit on the oldest one
// refreshes it, so a bound of three entries keeps it and the two newest.
TEST(CachePrune, KeepsTheMostRecentlyUsedUnderTheSizeAndAHitRefreshes) {
  TempDir t;
  DiskCacheOptions o;
  o.dir = t.path();
  std::vector<std::string> keys;
  {
    DiskCache c(o);
    for (int i = 0; i < 5; ++i) {
      keys.push_back(key_for("sm_90a", "nvrtc 12.8", std::to_string(i)));
      ASSERT_TRUE(c.put(keys.back(), std::string(1000, char('a' + i))).ok());
      set_mtime(t / entry_file_name(keys.back()), 100 * (i + 1));
    }
  }
  {
    DiskCache reader(o);  // a fresh process: the hit comes from disk
    ASSERT_TRUE(reader.get(keys[0]).has_value());
    EXPECT_EQ(reader.counters().disk_hits, 1u);
  }
  EXPECT_GT(mtime(t / entry_file_name(keys[0])), 500) << "a hit refreshes the entry";
  const uint64_t entry_bytes = encode_cache_entry(keys[0], std::string(1000, 'a')).size();

  CachePruneOptions p;
  p.max_bytes = 3 * entry_bytes + entry_bytes / 2;
  Result<CachePruneReport> r = cache_prune(t.path(), p);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->kept, 3u);
  EXPECT_EQ(r->removed, 2u);
  EXPECT_LE(r->kept_bytes, *p.max_bytes);
  for (int i : {0, 3, 4}) EXPECT_TRUE(std::filesystem::exists(t / entry_file_name(keys[i]))) << i;
  for (int i : {1, 2}) EXPECT_FALSE(std::filesystem::exists(t / entry_file_name(keys[i]))) << i;

  // Never a partial entry: everything left verifies, nothing else was written.
  Result<CacheVerifyReport> v = cache_verify(t.path(), false);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->valid, 3u);
  EXPECT_EQ(v->corrupt, 0u);
  EXPECT_EQ(v->temp_files, 0u);
  DiskCache again(o);
  EXPECT_EQ(again.get(keys[4]), std::string(1000, 'e'));
}

TEST(CachePrune, OlderThanRemovesUnusedEntriesAndStaleTemporariesOnly) {
  TempDir t;
  DiskCacheOptions o;
  o.dir = t.path();
  DiskCache c(o);
  ASSERT_TRUE(c.put("old", "1").ok());
  ASSERT_TRUE(c.put("new", "2").ok());
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  set_mtime(t / entry_file_name("old"), now - 10 * 86400);
  const std::string stale = t / (entry_file_name("x") + ".tmp.1.0.0");
  const std::string in_flight = t / (entry_file_name("y") + ".tmp.2.0.0");
  testing::write_all(stale, "partial");
  testing::write_all(in_flight, "partial");
  set_mtime(stale, now - 2 * 3600);
  testing::write_all(t / "README", "not ours");

  int code = 0;
  std::string out = run({"prune", "--older-than", "7", "--cache-dir", t.path(), "--json"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"kept\":1"), std::string::npos) << out;
  EXPECT_NE(out.find("\"removed\":2"), std::string::npos) << out;  // "old" and the stale temp
  EXPECT_FALSE(std::filesystem::exists(t / entry_file_name("old")));
  EXPECT_TRUE(std::filesystem::exists(t / entry_file_name("new")));
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(in_flight)) << "a put in flight is left alone";
  EXPECT_TRUE(std::filesystem::exists(t / "README"));
}

TEST(CachePrune, CommandLineErrors) {
  int code = 0;
  run({"prune"}, &code);
  EXPECT_EQ(code, kCacheExitUsage);
  run({"prune", "--max-size", "lots"}, &code);
  EXPECT_EQ(code, kCacheExitUsage);
  run({"stats", "--max-size", "1G"}, &code);
  EXPECT_EQ(code, kCacheExitUsage);
  run({"prune", "--older-than", "-3"}, &code);
  EXPECT_EQ(code, kCacheExitUsage);
}

TEST(CacheStats, CountsEntriesAndBytesPerArchCompilerAndVersion) {
  TempDir t;
  DiskCacheOptions o;
  o.dir = t.path();
  DiskCache c(o);
  const std::string a = key_for("sm_90a", "nvrtc 12.8", "1"),
                    b = key_for("sm_90a", "nvrtc 12.8", "2"), h = key_for("host", "g++ 12", "3");
  ASSERT_TRUE(c.put(a, "aaaa").ok());
  ASSERT_TRUE(c.put(b, "bb").ok());
  ASSERT_TRUE(c.put(h, "h").ok());
  ASSERT_TRUE(c.put("legacy", "x").ok());
  Result<CacheBreakdown> r = cache_breakdown(t.path());
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->by_arch.size(), 3u);
  EXPECT_EQ(r->by_arch["sm_90a"].entries, 2u);
  EXPECT_EQ(r->by_arch["sm_90a"].bytes,
            encode_cache_entry(a, "aaaa").size() + encode_cache_entry(b, "bb").size());
  EXPECT_EQ(r->by_arch["host"].entries, 1u);
  EXPECT_EQ(r->by_arch["unknown"].entries, 1u);
  EXPECT_EQ(r->by_compiler["nvrtc 12.8"].entries, 2u);
  EXPECT_EQ(r->by_compiler["g++ 12"].entries, 1u);
  EXPECT_EQ(r->by_version["0.1.0"].entries, 3u);

  int code = 0;
  std::string out = run({"stats", "--json", "--cache-dir", t.path()}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(
      out.find("\"by_arch\":{\"host\":{\"entries\":1,\"bytes\":" +
               std::to_string(encode_cache_entry(h, "h").size()) + "},\"sm_90a\":{\"entries\":2"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("\"by_compiler\":{\"g++ 12\":{\"entries\":1"), std::string::npos) << out;
}

}  // namespace
}  // namespace dg
