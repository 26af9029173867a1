// Prebuilding for GPUs from a CPU machine: the key a CPU machine writes for sm_90a is the key a
// Hopper process (compute capability 9.0) looks up, and `dyngen compile` over several files and
// archs fills a cache that a second run finds entirely.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "ir/sha256.h"
#include "runtime/cache_entry.h"
#include "runtime/cache_key.h"
#include "runtime/compiler.h"
#include "tests/common/cli_json.h"
#include "tests/common/cli_process.h"
#include "tests/common/fixtures.h"
#include "tests/common/temp_dir.h"

namespace dg {
namespace {

namespace fs = std::filesystem;

using testing::cli_json;
using testing::run_cli;
using testing::TempDir;

const std::string kSeed = testing::fixture_path("seed_expert_mlp.dgir");
const std::string kLora = testing::repo_path("tests/cli/lora_mlp.dgir");

TEST(Prebuild, KeyWrittenForSm90aIsTheKeyOfAnH200) {
  TempDir tmp;
  const fs::path dir = tmp / "key";
  Graph seed = testing::load_fixture("seed_expert_mlp.dgir");
  CompileRequest req;
  req.target = "sm_90a";  // this machine has no GPU: compile only
  req.cache_dir = dir.string();
  CompileOutcome o = compile_graph(seed, req);
  ASSERT_TRUE(o.ok()) << o.error;
  // What a process on an H200 computes: its device's arch, the same source and compiler.
  const std::string h200 = kernel_cache_key(
      kernel_key_parts(o.executable->plan().source, arch_for_compute_capability(90)).value());
  EXPECT_EQ(o.key, sha256_hex(h200));
  EXPECT_TRUE(fs::exists(dir / entry_file_name(h200))) << "the entry an H200 process opens";
  // An Ampere device looks elsewhere.
  const std::string a100 = kernel_cache_key(
      kernel_key_parts(o.executable->plan().source, arch_for_compute_capability(80)).value());
  EXPECT_NE(sha256_hex(a100), o.key);
}

TEST(Prebuild, CompileManyFilesForSeveralArchsThenAllAreCached) {
  TempDir tmp;
  const fs::path dir = tmp / "many";
  const std::string args =
      "compile " + kSeed + " " + kLora + " --arch sm_80 --arch sm_90a --cache-dir " + dir.string();
  auto [code, out] = run_cli(args);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("summary: 2 graphs x 2 archs = 4 binaries"), std::string::npos) << out;
  EXPECT_NE(out.find("compiled 4, already cached 0, failed 0"), std::string::npos) << out;
  auto [code2, again] = run_cli(args + " --json");
  ASSERT_EQ(code2, 0) << again;
  const nlohmann::json summary = cli_json({code2, again}).at("summary");
  EXPECT_EQ(summary.at("compiled"), 0) << again;
  EXPECT_EQ(summary.at("already_cached"), 4) << again;
  EXPECT_EQ(summary.at("failed"), 0) << again;
  auto [code3, stats] = run_cli("cache stats --json --cache-dir " + dir.string());
  ASSERT_EQ(code3, 0) << stats;
  EXPECT_NE(stats.find("\"by_arch\":{\"sm_80\":{\"entries\":2"), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"sm_90a\":{\"entries\":2"), std::string::npos) << stats;
}

TEST(Prebuild, BadFilesAreReportedAndTheRestStillCompiles) {
  TempDir tmp;
  const fs::path dir = tmp / "bad";
  fs::create_directories(dir / "dump");
  auto [code, out] = run_cli("compile " + (dir / "dump").string() + " --cache-dir " + dir.string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("a folder without graph.fb files"), std::string::npos) << out;
  {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen((dir / "dump/x.fb").c_str(), "wb"),
                                            std::fclose);
    std::fputs("not a graph", f.get());
  }
  auto [code2, out2] = run_cli("compile " + (dir / "dump").string() + " " + kSeed +
                               " --arch sm_90a --cache-dir " + dir.string());
  EXPECT_EQ(code2, 2) << out2;
  EXPECT_NE(out2.find("1 graphs x 1 archs = 1 binaries"), std::string::npos) << out2;
  EXPECT_NE(out2.find("failed 1"), std::string::npos) << out2;
}

}  // namespace
}  // namespace dg
