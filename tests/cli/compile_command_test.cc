// `dyngen compile` and the disk cache across processes: a second process finds the kernels
// (nvrtc_compiles 0), 8 processes compiling one graph into an empty folder all succeed and leave
// valid entries, a corrupted entry is detected and rebuilt, an unwritable folder still compiles;
// --emit writes the source and the IR after each pass; bad inputs get their exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/cli_json.h"
#include "tests/common/cli_process.h"
#include "tests/common/source_tree.h"
#include "tests/common/temp_dir.h"

namespace {

namespace fs = std::filesystem;

using dg::testing::cli_json;
using dg::testing::CliResult;
using dg::testing::has;
using dg::testing::run_cli;
using dg::testing::TempDir;

std::string fixture() { return dg::testing::fixture_path("seed_expert_mlp.dgir"); }

TEST(CompileCli, SecondProcessHitsTheDiskCache) {
  TempDir tmp;
  const fs::path dir = tmp / "hit";
  CliResult first =
      run_cli("compile " + fixture() + " --arch sm_90a --json --cache-dir " + dir.string());
  ASSERT_EQ(first.exit_code, 0) << first.out;
  nlohmann::json first_json = cli_json(first);
  EXPECT_EQ(first_json.at("cache_hit"), false) << first.out;
  EXPECT_EQ(first_json.at("nvrtc_compiles"), 1) << first.out;
  CliResult second =
      run_cli("compile " + fixture() + " --arch sm_90a --json --cache-dir " + dir.string());
  ASSERT_EQ(second.exit_code, 0) << second.out;
  nlohmann::json second_json = cli_json(second);
  EXPECT_EQ(second_json.at("cache_hit"), true) << second.out;
  EXPECT_EQ(second_json.at("cache_tier"), "disk") << second.out;
  EXPECT_EQ(second_json.at("nvrtc_compiles"), 0) << second.out;
  // Same key both times.
  EXPECT_EQ(first_json.at("key"), second_json.at("key"));
}

// Note [Fallbacks compiled on first need]: a compile builds one binary; --fallbacks builds the
// fallbacks' too, into the same cache, so a prebuilt cache leaves no compile to a later process.
TEST(CompileCli, FallbacksAreCompiledOnlyWhenAsked) {
  TempDir tmp;
  const std::string cache = " --arch sm_90a --json --cache-dir " + (tmp / "c");
  CliResult plain = run_cli("compile " + fixture() + cache);
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_EQ(cli_json(plain).at("nvrtc_compiles"), 1) << plain.out;
  CliResult with = run_cli("compile " + fixture() + cache + " --fallbacks");
  ASSERT_EQ(with.exit_code, 0) << with.out;
  EXPECT_EQ(cli_json(with).at("nvrtc_compiles"), 1) << "the first binary was cached: " << with.out;
  CliResult again = run_cli("compile " + fixture() + cache + " --fallbacks");
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(cli_json(again).at("nvrtc_compiles"), 0) << again.out;
}

TEST(CompileCli, EightConcurrentCompilesIntoAnEmptyFolderAllSucceed) {
  TempDir tmp;
  const fs::path dir = tmp / "race";
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      std::string cmd = std::string(dg::testing::dyngen_binary()) + " compile " + fixture() +
                        " --arch sm_80 --json --cache-dir " + dir.string() + " > /dev/null 2>&1";
      _exit(WEXITSTATUS(std::system(cmd.c_str())));
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a concurrent compile failed";
  }
  CliResult verify = run_cli("cache verify --cache-dir " + dir.string());
  EXPECT_EQ(verify.exit_code, 0) << verify.out;
  int entries = 0, stray = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".dgk")
      ++entries;
    else
      ++stray;
  }
  EXPECT_EQ(entries, 1) << "one graph, one arch: one entry";
  EXPECT_EQ(stray, 0) << "no temporary files left behind";
}

TEST(CompileCli, CorruptedEntryIsDetectedAndRebuilt) {
  TempDir tmp;
  const fs::path dir = tmp / "corrupt";
  ASSERT_EQ(
      run_cli("compile " + fixture() + " --arch sm_90a --cache-dir " + dir.string()).exit_code, 0);
  fs::path entry;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".dgk") entry = e.path();
  ASSERT_FALSE(entry.empty());
  {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(entry) / 2));
    f.put('\x5a').put('\xa5');
  }
  CliResult verify = run_cli("cache verify --cache-dir " + dir.string());
  EXPECT_EQ(verify.exit_code, 4) << verify.out;
  CliResult again =
      run_cli("compile " + fixture() + " --arch sm_90a --json --cache-dir " + dir.string());
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(cli_json(again).at("nvrtc_compiles"), 1) << again.out;
  EXPECT_EQ(run_cli("cache verify --cache-dir " + dir.string()).exit_code, 0);
}

TEST(CompileCli, UnwritableCacheFolderStillCompiles) {
  // Tests run as root, for whom permissions do not stop writes: a folder under a regular file
  // cannot be created by anyone.
  TempDir tmp;
  const fs::path file = tmp / "rofile";
  std::ofstream(file) << "not a folder";
  CliResult r = run_cli("compile " + fixture() + " --arch sm_90a --json --cache-dir " +
                        (file / "cache").string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(cli_json(r).at("nvrtc_compiles"), 1) << r.out;
}

TEST(CompileCli, EmitWritesTheSourceAndTheIrAfterEachPass) {
  TempDir tmp;
  const fs::path dir = tmp / "emit";
  CliResult r = run_cli("compile " + fixture() + " --arch sm_80 --emit " + (dir / "out").string() +
                        " --cache-dir " + (dir / "cache").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir / "out" / "kernels.cu"));
  std::vector<std::string> stages;
  for (auto& e : fs::directory_iterator(dir / "out"))
    if (e.path().extension() == ".dgir") stages.push_back(e.path().filename().string());
  std::sort(stages.begin(), stages.end());
  // One file per pass of passes/pipeline.cc, numbered in pipeline order.
  std::vector<std::string> expected{"0_input.dgir",
                                    "1_cse.dgir",
                                    "2_fold_casts.dgir",
                                    "3_fold_permutes.dgir",
                                    "4_dce.dgir",
                                    "5_split_weight_grads.dgir",
                                    "6_hoist_gemm_scale.dgir",
                                    "7_concat_gemm_k.dgir",
                                    "8_fuse_lora_linear.dgir",
                                    "9_fuse_gate_up.dgir",
                                    "10_fuse_operand_views.dgir",
                                    "11_fuse_pointwise.dgir",
                                    "12_fuse_concat_operands.dgir",
                                    "13_fuse_epilogue_producers.dgir",
                                    "14_group_independent_gemms.dgir"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(stages, expected);
  // A disabled pass is skipped, and says so by its absence.
  r = run_cli("compile " + fixture() + " --arch sm_80 --disable-pass cse --emit " +
              (dir / "nocse").string() + " --cache-dir " + (dir / "cache").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(fs::exists(dir / "nocse" / "1_cse.dgir"));
}

TEST(CompileCli, BadInputsGetTheirExitCodes) {
  TempDir tmp;
  const fs::path dir = tmp / "bad";
  fs::create_directories(dir);
  std::ofstream(dir / "garbage.fb") << "definitely not a flatbuffer";
  EXPECT_EQ(run_cli("compile " + (dir / "garbage.fb").string()).exit_code, 2);
  EXPECT_EQ(run_cli("compile " + (dir / "missing.dgir").string()).exit_code, 2);
  EXPECT_EQ(run_cli("compile " + fixture() + " --arch gfx90a").exit_code, 2);
  // A misspelt pass is refused (it used to compile with nothing disabled).
  CliResult typo =
      run_cli("compile " + fixture() + " --disable-pass wgmm --cache-dir " + dir.string());
  EXPECT_EQ(typo.exit_code, 2) << typo.out;
  EXPECT_TRUE(has(typo.out, "'wgmm': no such pass")) << typo.out;
  // Valid graph, no kernel for an f64 index_add: unsupported (3), naming the reason.
  std::ofstream(dir / "f64.dgir") << "graph @g\nsym n in [0, inf] div 1\ninput %x: f64[4, 2]\n"
                                     "input %i: i64[n]\ninput %s: f64[n, 2]\n"
                                     "%y: f64[4, 2] = index_add(%x, %i, %s) {dim = 0}\noutput %y\n";
  CliResult f64 =
      run_cli("compile " + (dir / "f64.dgir").string() + " --cache-dir " + dir.string());
  EXPECT_EQ(f64.exit_code, 3) << f64.out;
  EXPECT_TRUE(has(f64.out, "index_add on f64")) << f64.out;
  // float16 compiles (it was refused before it had kernels).
  std::ofstream(dir / "f16.dgir") << "graph @g\nsym n in [0, inf] div 1\ninput %x: f16[n, 4]\n"
                                     "%y: f16[n, 4] = exp(%x)\noutput %y\n";
  CliResult f16 =
      run_cli("compile " + (dir / "f16.dgir").string() + " --cache-dir " + dir.string());
  EXPECT_EQ(f16.exit_code, 0) << f16.out;
}

}  // namespace
