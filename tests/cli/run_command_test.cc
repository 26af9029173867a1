// `dyngen run`: the graph compiled for the host emulation, run on random inputs and compared with
// the reference evaluator (exit 4 beyond tolerance), for the sm_80 and the sm_90a source.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/cli_process.h"
#include "tests/common/source_tree.h"
#include "tests/common/temp_dir.h"

namespace {

namespace fs = std::filesystem;

using dg::testing::CliResult;
using dg::testing::fixture_path;
using dg::testing::has;
using dg::testing::run_cli;
using dg::testing::TempDir;

std::string fixture() { return fixture_path("seed_expert_mlp.dgir"); }

TEST(RunCli, RunChecksNumericsAgainstTheReference) {
  TempDir tmp;
  const fs::path dir = tmp / "run";
  CliResult r = run_cli("run " + fixture() + " --bind s77=33 --cache-dir " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "ok")) << r.out;
  CliResult unbound = run_cli("run " + fixture() + " --cache-dir " + dir.string());
  EXPECT_EQ(unbound.exit_code, 2) << unbound.out;
}

// `run --arch sm_90a` runs the sm_90a source under emulation (Note [sm_90a GEMMs]): at N = 4096
// the 128-row wgmma tile runs from M = 513, so s = 600 runs wgmma fed by TMA.
TEST(RunCli, RunExecutesTheSm90SourceUnderEmulation) {
  TempDir tmp;
  const fs::path dir = tmp / "run_sm90";
  fs::create_directories(dir);
  const fs::path graph = dir / "wide_linear.dgir";
  std::ofstream(graph) << "graph @wide_linear\n"
                          "sym s in [0, inf] div 1\n"
                          "input %x: bf16[s, 128]\n"
                          "input %w: bf16[4096, 128]\n"
                          "%y: bf16[s, 4096] = linear(%x, %w)\n"
                          "%z: bf16[s, 4096] = silu(%y)\n"
                          "output %z\n";
  const std::string common = " --bind s=600 --cache-dir " + (dir / "cache").string();
  CliResult r = run_cli("run " + graph.string() + " --arch sm_90a" + common + " --emit " +
                        (dir / "out").string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "ok")) << r.out;
  std::ifstream source(dir / "out" / "kernels.cu");
  std::stringstream text;
  text << source.rdbuf();
  EXPECT_TRUE(has(text.str(), "dg_wgmma_mainloop")) << text.str();
  EXPECT_EQ(run_cli("run " + graph.string() + " --arch cuda" + common).exit_code, 2);
}

// The seed backward's grad_x is one K-concatenated GEMM that rounds once where the graph rounded
// each product: right at the tensor's scale, not element by element (Note [Tolerance at the
// tensor's scale]). `dyngen run` reported a mismatch here before it compared at that scale.
TEST(RunCli, RunAcceptsTheFusedBackwardsRounding) {
  TempDir tmp;
  const fs::path dir = tmp / "run_bwd";
  std::string graph = fixture_path("seed_expert_mlp_backward.dgir");
  CliResult r = run_cli("run " + graph + " --bind s77=2 --cache-dir " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(has(r.out, "MISMATCH")) << r.out;
}

}  // namespace
