// Every `--json` output of the CLI, and dg_executable_describe, is JSON (Note [JSON output] in
// runtime/json_text.cc): each command that takes --json runs as a child process and its whole
// output parses with nlohmann, also for a cache folder whose name needs escaping and is not UTF-8.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/dyngen.h"
#include "tests/common/cli_process.h"
#include "tests/common/file_bytes.h"
#include "tests/common/source_tree.h"
#include "tests/common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using dg::testing::CliResult;
using dg::testing::run_cli;
using dg::testing::TempDir;
using Json = nlohmann::json;

std::string two_gemms() { return dg::testing::repo_path("tests/cli/plan_two_gemms.dgir"); }

// Runs `dyngen ARGS`; the whole output (stdout and stderr) must be one JSON value.
Json run_json(const std::string& args, int expected_exit = 0) {
  CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, expected_exit) << args << "\n" << r.out;
  try {
    return Json::parse(r.out);
  } catch (const Json::parse_error& e) {
    ADD_FAILURE() << args << ": not JSON (" << e.what() << "):\n" << r.out;
    return nullptr;
  }
}

TEST(JsonOutput, EveryCommandWithJsonPrintsJson) {
  TempDir tmp;
  const fs::path dir = tmp / "cache";
  const std::string cache = " --cache-dir '" + dir.string() + "'";
  const std::string g = two_gemms();
  Json host = run_json("compile " + g + " --arch host --json" + cache);
  EXPECT_EQ(host.at("target"), "host");
  EXPECT_EQ(host.at("file"), g);
  Json device = run_json("compile " + g + " --arch sm_80 --json" + cache);
  EXPECT_TRUE(device.at("kernels").at(0).at("ptxas").is_object());
  Json batch = run_json("compile " + g + " --arch host --arch sm_80 --json" + cache);
  EXPECT_EQ(batch.at("results").size(), 2u);
  EXPECT_EQ(batch.at("summary").at("already_cached"), 2);
  Json plan = run_json("plan " + g + " --bind s=512 --gpu a100 --baseline eager --json" + cache);
  EXPECT_EQ(plan.at("bindings"), Json({{"s", 512}}));
  EXPECT_EQ(plan.at("baseline").at("kind"), "eager");
  Json stats = run_json("cache stats --json" + cache);
  EXPECT_EQ(stats.at("entries"), 2);
  EXPECT_EQ(stats.at("by_arch").at("sm_80").at("entries"), 1);
  Json verify = run_json("cache verify --json" + cache);
  EXPECT_EQ(verify.at("valid"), 2);
  EXPECT_TRUE(verify.at("corrupt_entries").is_array());
  Json prune = run_json("cache prune --max-size 1G --json" + cache);
  EXPECT_EQ(prune.at("kept"), 2);
  Json clear = run_json("cache clear --json" + cache);
  EXPECT_EQ(clear.at("removed"), 2);
}

// Quotes, a backslash and a tab are escaped; a byte that is not UTF-8 becomes U+FFFD rather than
// invalid JSON or an error.
TEST(JsonOutput, AnOddFolderNameIsEscaped) {
  const std::string name = "odd \"name\" \\ \t \xff";
  TempDir tmp;
  const fs::path dir = tmp / name;
  fs::create_directories(dir);
  std::ofstream(dir / "README") << "not an entry";
  const std::string cache = " --cache-dir '" + dir.string() + "'";
  const std::string shown = dir.parent_path().string() + "/odd \"name\" \\ \t \xef\xbf\xbd";
  for (const char* command : {"stats", "verify", "clear"}) {
    SCOPED_TRACE(command);
    Json j = run_json(std::string("cache ") + command + " --json" + cache);
    EXPECT_EQ(j.at("folder"), shown);
  }
  EXPECT_EQ(run_json("cache verify --json" + cache).at("other_files"), Json({"README"}));
  Json compiled = run_json("compile " + two_gemms() + " --arch host --json" + cache);
  EXPECT_EQ(compiled.at("cache_hit"), false);
}

TEST(JsonOutput, ExecutableDescriptionIsJson) {
  const std::string text = dg::testing::read_all(two_gemms());
  dg_graph* graph = nullptr;
  ASSERT_EQ(dg_graph_load_text(text.c_str(), &graph), 0) << dg_last_error();
  TempDir tmp;
  const fs::path dir = tmp / "capi";
  dg_compile_options options = {};
  options.target = "host";
  const std::string cache = dir.string();
  options.cache_dir = cache.c_str();
  dg_executable* exe = nullptr;
  ASSERT_EQ(dg_compile(graph, &options, &exe), 0) << dg_last_error();
  char* description = nullptr;
  ASSERT_EQ(dg_executable_describe(exe, &description), 0) << dg_last_error();
  Json j = Json::parse(description);
  EXPECT_EQ(j.at("target"), "host");
  EXPECT_EQ(j.at("cache_tier"), "none");
  // Two GEMMs, each with two tile variants (Note [Tile choice]) and its fallback (Note [GEMM
  // fallbacks]) last: the second GEMM's first kernel.
  EXPECT_EQ(j.at("kernels").size(), 6u);
  EXPECT_EQ(j.at("kernels").at(2).at("variant"), 2);
  EXPECT_EQ(j.at("kernels").at(2).at("fallback"), true);
  EXPECT_EQ(j.at("kernels").at(3).at("variant"), 0);
  EXPECT_EQ(j.at("kernels").at(3).at("fallback"), false);
  EXPECT_EQ(j.at("kernels").at(4).at("variant"), 1);
  EXPECT_EQ(j.at("kernels").at(3).at("ops"), Json({"linear"}));
  EXPECT_FALSE(j.at("kernels").at(0).contains("ptxas"));
  dg_free(description);
  dg_executable_free(exe);
  dg_graph_free(graph);
}

}  // namespace
