// `dyngen cache stats|verify|clear` and the management functions under it.
#include "frontends/cli/cache_command.h"

#include <gtest/gtest.h>
#include <sys/time.h>

#include <filesystem>
#include <sstream>

#include "runtime/cache_admin.h"
#include "runtime/cache_entry.h"
#include "runtime/disk_cache.h"
#include "tests/common/file_bytes.h"
#include "tests/common/temp_dir.h"

namespace dg {
namespace {

using testing::TempDir;

struct CliRun {
  int code;
  std::string out, err;
};

CliRun cache(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = run_cache_command(args, out, err);
  return CliRun{code, out.str(), err.str()};
}

// A folder with two valid entries and one file that is not ours.
void populate(const TempDir& t) {
  DiskCacheOptions o;
  o.dir = t.path();
  DiskCache c(o);
  ASSERT_TRUE(c.put("one", "1111").ok());
  ASSERT_TRUE(c.put("two", "22").ok());
  testing::write_all(t / "README", "mine");
}

void corrupt(const TempDir& t, const std::string& key) {
  std::string e = testing::read_all(t / entry_file_name(key));
  e.back() ^= 1;
  testing::write_all(t / entry_file_name(key), e);
}

TEST(CacheCommand, StatsCountsEntriesBytesAndOtherFiles) {
  TempDir t;
  populate(t);
  Result<CacheStats> s = cache_stats(t.path());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(s->exists);
  EXPECT_EQ(s->entries, 2u);
  EXPECT_EQ(s->bytes,
            encode_cache_entry("one", "1111").size() + encode_cache_entry("two", "22").size());
  EXPECT_EQ(s->other_files, 1u);

  CliRun r = cache({"stats", "--cache-dir", t.path()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("entries:     2"), std::string::npos) << r.out;
  r = cache({"cache", "stats", "--json", "--cache-dir=" + t.path()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"entries\":2,\"bytes\":" + std::to_string(s->bytes)), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"folder\":\"" + t.path() + "\""), std::string::npos) << r.out;
}

TEST(CacheCommand, MissingFolderIsEmpty) {
  TempDir t;
  CliRun r = cache({"stats", "--json", "--cache-dir", t / "nope"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"exists\":false,\"entries\":0"), std::string::npos) << r.out;
  EXPECT_EQ(cache({"verify", "--cache-dir", t / "nope"}).code, 0);
  EXPECT_EQ(cache({"clear", "--cache-dir", t / "nope"}).code, 0);
  EXPECT_FALSE(std::filesystem::exists(t / "nope"));
}

TEST(CacheCommand, VerifyFindsReportsAndRemovesCorruptEntries) {
  TempDir t;
  populate(t);
  CliRun r = cache({"verify", "--cache-dir", t.path()});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("README"), std::string::npos) << r.out;

  corrupt(t, "two");
  r = cache({"verify", "--json", "--cache-dir", t.path()});
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("\"valid\":1,\"corrupt\":1,\"removed\":0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checksum mismatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"other_files\":[\"README\"]"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(t / entry_file_name("two")));

  r = cache({"verify", "--remove-corrupt", "--cache-dir", t.path()});
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("removed:     1"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(t / entry_file_name("two")));
  EXPECT_TRUE(std::filesystem::exists(t / "README"));
  EXPECT_EQ(cache({"verify", "--cache-dir", t.path()}).code, 0);
}

TEST(CacheCommand, VerifyRemovesOnlyStaleTemporaries) {
  TempDir t;
  populate(t);
  const std::string stale = t / (entry_file_name("x") + ".tmp.1.0.0");
  const std::string fresh = t / (entry_file_name("y") + ".tmp.2.0.0");
  testing::write_all(stale, "partial");
  testing::write_all(fresh, "partial");
  const timeval old[2] = {{1000000, 0}, {1000000, 0}};
  ASSERT_EQ(utimes(stale.c_str(), old), 0);
  Result<CacheVerifyReport> v = cache_verify(t.path(), true);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->temp_files, 2u);
  EXPECT_EQ(v->removed, 1u);
  EXPECT_EQ(v->corrupt, 0u);
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(fresh));
}

TEST(CacheCommand, ClearRemovesOnlyOurFiles) {
  TempDir t;
  populate(t);
  testing::write_all(t / (entry_file_name("x") + ".tmp.1.0.0"), "partial");
  CliRun r = cache({"clear", "--json", "--cache-dir", t.path()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"removed\":3"), std::string::npos) << r.out;
  Result<CacheStats> s = cache_stats(t.path());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->entries, 0u);
  EXPECT_EQ(s->temp_files, 0u);
  EXPECT_EQ(s->other_files, 1u);
  EXPECT_TRUE(std::filesystem::exists(t / "README"));

  DiskCacheOptions o;
  o.dir = t.path();
  EXPECT_FALSE(DiskCache(o).get("one"));  // a new process would miss and recompile
}

TEST(CacheCommand, UsesDyngenCacheDir) {
  TempDir t;
  populate(t);
  const char* old = getenv("DYNGEN_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("DYNGEN_CACHE_DIR", t.path().c_str(), 1);
  CliRun r = cache({"stats", "--json"});
  old ? setenv("DYNGEN_CACHE_DIR", saved.c_str(), 1) : unsetenv("DYNGEN_CACHE_DIR");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"entries\":2"), std::string::npos) << r.out;
}

TEST(CacheCommand, BadUsageExitsTwo) {
  TempDir t;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},
           {"frobnicate"},
           {"stats", "extra"},
           {"stats", "--bogus"},
           {"stats", "--cache-dir"},
           {"stats", "--cache-dir="},
           {"stats", "--remove-corrupt"},
       }) {
    CliRun r = cache(args);
    EXPECT_EQ(r.code, 2) << ::testing::PrintToString(args);
    EXPECT_NE(r.err.find("usage:"), std::string::npos) << r.err;
  }
  CliRun help = cache({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("usage:"), std::string::npos);
}

TEST(CacheCommand, UnreadableFolderIsAnInternalError) {
  TempDir t;
  testing::write_all(t / "file", "x");
  for (const char* cmd : {"stats", "verify", "clear"}) {
    CliRun r = cache({cmd, "--cache-dir", t / "file"});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.err.find("cannot list"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace dg
