// `dyngen plan`: exit codes, bad bindings, and the roofline figures of a small graph against
// values worked out by hand (tests/compile/plan_two_gemms.dgir explains them). The achievable
// estimate beside them is tested in plan_model_cli_test.cc.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli_process.h"

namespace {

using dg::testing::CliResult;
using dg::testing::run_cli;

std::string two_gemms() { return std::string(DG_TESTS_DIR) + "/plan_two_gemms.dgir"; }
std::string seed() { return std::string(DG_FIXTURES_DIR) + "/seed_expert_mlp.dgir"; }

// plan compiles (for the ptxas report and the SASS): into a folder of this process's own.
CliResult run_plan(const std::string& args) {
  static const std::string dir =
      (std::filesystem::temp_directory_path() / ("dyngen-plan-cli-" + std::to_string(getpid())))
          .string();
  return run_cli(args + " --cache-dir " + dir);
}

bool has(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

TEST(PlanCli, TwoGemmsOnH200MatchHandCount) {
  CliResult r = run_plan("plan " + two_gemms() + " --bind s=512 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // k0: 2*512*32*64 FLOPs, 512*128 + 4096 + 512*64 bytes; k1: 2*512*16*32, 512*64 + 1024 + 512*32.
  EXPECT_TRUE(has(r.out, "\"flops\": 2097152, \"tensor_flops\": 2097152, \"bytes\": 102400"))
      << r.out;
  EXPECT_TRUE(has(r.out, "\"flops\": 524288, \"tensor_flops\": 524288, \"bytes\": 50176")) << r.out;
  // Both memory-bound on H200: (102400 + 50176) B / 4.8 TB/s.
  EXPECT_TRUE(has(r.out,
                  "\"total\": {\"launches\": 2, \"flops\": 2621440, \"tensor_flops\": "
                  "2621440, \"bytes\": 152576"))
      << r.out;
  EXPECT_TRUE(has(r.out, "\"roofline_seconds\": 3.17867e-08, ")) << r.out;
  EXPECT_TRUE(has(r.out, "\"bound\": \"memory\"")) << r.out;
  // y: 512 * 32 * 2 bytes of workspace, 64 per token.
  EXPECT_TRUE(has(r.out,
                  "\"workspace_bytes\": 32768, \"workspace_bytes_per_token\": 64, "
                  "\"per_token_symbol\": \"s\""))
      << r.out;
  EXPECT_TRUE(has(r.out, "\"name\": \"H200\"")) << r.out;
  EXPECT_TRUE(has(r.out, "ESTIMATE")) << r.out;
}

TEST(PlanCli, A100UsesItsOwnPeaks) {
  CliResult r = run_plan("plan " + two_gemms() + " --bind s=512 --gpu a100 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // (102400 + 50176) B / 2.0 TB/s; compute is well under that at 312 TFLOP/s.
  EXPECT_TRUE(has(r.out, "\"roofline_seconds\": 7.6288e-08, ")) << r.out;
  EXPECT_TRUE(has(r.out, "\"name\": \"A100\"")) << r.out;
}

TEST(PlanCli, ZeroTokensLaunchNothing) {
  CliResult r = run_plan("plan " + two_gemms() + " --bind s=0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "\"total\": {\"launches\": 0, \"flops\": 0")) << r.out;
  EXPECT_TRUE(has(r.out, "\"launched\": false")) << r.out;
  EXPECT_FALSE(has(r.out, "\"launched\": true")) << r.out;
}

TEST(PlanCli, TextReportIsLabelledAsAnEstimate) {
  CliResult r = run_plan("plan " + two_gemms() + " --bind s=512");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "ESTIMATE (a model, not a measurement)")) << r.out;
  EXPECT_TRUE(has(r.out, "(roofline bound ")) << r.out;
  EXPECT_TRUE(has(r.out, "total: 2 launches")) << r.out;
  EXPECT_TRUE(has(r.out, "workspace: 32768 bytes (64.0 per token of s)")) << r.out;
}

TEST(PlanCli, SeedGraphPlans) {
  CliResult r = run_plan("plan " + seed() + " --bind s77=512 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "\"per_token_symbol\": \"s77\"")) << r.out;
  // The forward's contractions: 3 base GEMMs (2*512*2048*1024 each) and 6 LoRA ones in f32.
  EXPECT_TRUE(has(r.out, "\"tensor_flops\": 6442450944, ")) << r.out;
}

// A number from the "total" object of plan --json.
double total_field(const std::string& json, const std::string& field) {
  size_t total = json.find("\"total\": {");
  size_t at = json.find("\"" + field + "\": ", total);
  if (total == std::string::npos || at == std::string::npos) return -1;
  return std::stod(json.substr(at + field.size() + 4));
}

TEST(PlanCli, FusionKeepsFlopsAndCutsLaunchesAndBytes) {
  const std::string unfused =
      " --disable-pass split_weight_grads --disable-pass hoist_gemm_scale --disable-pass "
      "concat_gemm_k --disable-pass fuse_lora_linear --disable-pass fuse_gate_up --disable-pass "
      "fuse_operand_views --disable-pass fuse_pointwise --disable-pass fuse_epilogue_producers "
      "--disable-pass group_independent_gemms";
  for (const char* graph : {"seed_expert_mlp", "seed_expert_mlp_backward"}) {
    SCOPED_TRACE(graph);
    const std::string file = std::string(DG_FIXTURES_DIR) + "/" + graph + ".dgir";
    CliResult f = run_plan("plan " + file + " --bind s77=512 --json");
    CliResult u = run_plan("plan " + file + " --bind s77=512 --json" + unfused);
    ASSERT_EQ(f.exit_code, 0) << f.out;
    ASSERT_EQ(u.exit_code, 0) << u.out;
    EXPECT_LT(total_field(f.out, "launches"), total_field(u.out, "launches"));
    EXPECT_LT(total_field(f.out, "bytes"), total_field(u.out, "bytes"));
    EXPECT_LT(total_field(f.out, "estimated_seconds"), total_field(u.out, "estimated_seconds"));
    // The same contractions either way (the weight-gradient reduction counts no graph node).
    EXPECT_EQ(total_field(f.out, "tensor_flops"), total_field(u.out, "tensor_flops"));
  }
}

// Note [Grouped GEMMs]: the seed backward's rank-r products of the gate and up gradients run as
// one pair of launches (partials and reduction, Note [Rank-r products]); --disable-pass
// group_independent_gemms gives them a pair each, with the same work.
TEST(PlanCli, GroupedRankRProductsSaveTwoLaunches) {
  const std::string file = std::string(DG_FIXTURES_DIR) + "/seed_expert_mlp_backward.dgir";
  CliResult grouped = run_plan("plan " + file + " --bind s77=512 --json");
  CliResult split =
      run_plan("plan " + file + " --bind s77=512 --json --disable-pass group_independent_gemms");
  ASSERT_EQ(grouped.exit_code, 0) << grouped.out;
  ASSERT_EQ(split.exit_code, 0) << split.out;
  EXPECT_EQ(total_field(grouped.out, "launches"), 8) << grouped.out;
  EXPECT_EQ(total_field(split.out, "launches"), 10) << split.out;
  EXPECT_TRUE(has(grouped.out, "grouped_fused_matmul")) << grouped.out;
  EXPECT_FALSE(has(split.out, "grouped_fused_matmul")) << split.out;
  for (const char* field : {"flops", "tensor_flops", "bytes"})
    EXPECT_EQ(total_field(grouped.out, field), total_field(split.out, field)) << field;
}

// compile --json: each kernel's symbolic FLOPs and bytes, totals, and ptxas's report, also when
// the binary comes from the disk cache (a second process).
TEST(PlanCli, CompileJsonShowsCostsAndPtxasReport) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("dyngen-plan-ptxas-" + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(dir);
  for (const char* tier : {"none", "disk"}) {
    SCOPED_TRACE(tier);
    CliResult r = run_cli("compile " + two_gemms() + " --arch sm_80 --json --cache-dir " + dir);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(has(r.out, std::string("\"cache_tier\": \"") + tier + "\"")) << r.out;
    EXPECT_TRUE(has(r.out,
                    "\"total_flops\": \"5120*s0\", \"total_tensor_flops\": \"5120*s0\", "
                    "\"total_bytes\": \"288*s0 + 5120\""))
        << r.out;
    EXPECT_TRUE(has(r.out, "\"nodes\": [0], \"ops\": [\"linear\"], \"flops\": \"4096*s0\""))
        << r.out;
    EXPECT_TRUE(has(r.out, "\"ptxas\": {\"arch\": \"sm_80\", \"registers\": ")) << r.out;
    EXPECT_TRUE(has(r.out, "\"spill_store_bytes\": 0, \"spill_load_bytes\": 0")) << r.out;
    EXPECT_FALSE(has(r.out, "\"ptxas\": null")) << r.out;
  }
  std::filesystem::remove_all(dir);
}

TEST(PlanCli, BadUsageExitsTwo) {
  const std::string g = two_gemms();
  for (const std::string& args : std::vector<std::string>{
           "plan " + g,                               // s unbound
           "plan " + g + " --bind s=abc",             // not an integer
           "plan " + g + " --bind s",                 // no value
           "plan " + g + " --bind s=512 --bind t=3",  // no such symbol
           "plan " + g + " --bind s=-1",              // outside [0, inf]
           "plan " + g + " --bind s=512 --gpu v100",  // unknown GPU
           "plan " + g + " --bind s=512 --gpu",       // --gpu without a value
           "plan " + g + " --bind s=512 --disable-pass no_such_pass",
           "plan " + g + " --bind s=512 --arch host",  // the model reads device code
           std::string("plan /nonexistent.dgir --bind s=1"), std::string("plan")}) {
    CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(has(r.out, "dyngen: ")) << args << "\n" << r.out;
  }
  CliResult seed_range = run_plan("plan " + seed() + " --bind s77=1");  // s77 in [2, inf]
  EXPECT_EQ(seed_range.exit_code, 2) << seed_range.out;
  EXPECT_TRUE(has(seed_range.out, "outside the symbol's facts")) << seed_range.out;
}

TEST(PlanCli, HelpExitsZero) {
  CliResult r = run_plan("plan --help");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "usage: dyngen plan")) << r.out;
}

}  // namespace
