// `dyngen plan`: exit codes, bad bindings, and the roofline figures of a small graph against
// values worked out by hand (tests/cli/plan_two_gemms.dgir explains them). The achievable
// estimate beside them is tested in plan_estimate_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/cli_json.h"
#include "tests/common/cli_process.h"
#include "tests/common/source_tree.h"
#include "tests/common/temp_dir.h"

namespace {

using dg::testing::cli_json;
using dg::testing::CliResult;
using dg::testing::fixture_path;
using dg::testing::has;
using dg::testing::run_cli;
using Json = nlohmann::json;

std::string two_gemms() { return dg::testing::repo_path("tests/cli/plan_two_gemms.dgir"); }
std::string seed() { return fixture_path("seed_expert_mlp.dgir"); }

// plan compiles (for the ptxas report and the SASS): into a folder of this process's own.
CliResult run_plan(const std::string& args) {
  static const dg::testing::TempDir dir;
  return run_cli(args + " --cache-dir " + dir.path());
}

TEST(PlanCli, TwoGemmsOnH200MatchHandCount) {
  CliResult r = run_plan("plan " + two_gemms() + " --bind s=512 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = cli_json(r);
  // Each GEMM has two tile variants (Note [Tile choice]) and a fallback (Note [GEMM fallbacks]);
  // 512 tokens launch one variant of each.
  ASSERT_EQ(j.at("kernels").size(), 6u) << r.out;
  Json k = Json::array();
  for (const Json& kernel : j.at("kernels"))
    if (kernel.at("launched").get<bool>()) k.push_back(kernel);
  ASSERT_EQ(k.size(), 2u) << r.out;
  // k0: 2*512*32*64 FLOPs, 512*128 + 4096 + 512*64 bytes; k1: 2*512*16*32, 512*64 + 1024 + 512*32.
  EXPECT_EQ(k[0].at("flops"), 2097152);
  EXPECT_EQ(k[0].at("tensor_flops"), 2097152);
  EXPECT_EQ(k[0].at("bytes"), 102400);
  EXPECT_EQ(k[1].at("flops"), 524288);
  EXPECT_EQ(k[1].at("tensor_flops"), 524288);
  EXPECT_EQ(k[1].at("bytes"), 50176);
  // Both memory-bound on H200: (102400 + 50176) B / 4.8 TB/s.
  const Json& total = j.at("total");
  EXPECT_EQ(total.at("launches"), 2);
  EXPECT_EQ(total.at("flops"), 2621440);
  EXPECT_EQ(total.at("tensor_flops"), 2621440);
  EXPECT_EQ(total.at("bytes"), 152576);
  EXPECT_DOUBLE_EQ(total.at("roofline_seconds").get<double>(), 3.17867e-08);
  EXPECT_EQ(k[0].at("bound"), "memory");
  EXPECT_EQ(k[1].at("bound"), "memory");
  // y: 512 * 32 * 2 bytes of workspace, 64 per token.
  EXPECT_EQ(j.at("workspace_bytes"), 32768);
  EXPECT_EQ(j.at("workspace_bytes_per_token"), 64);
  EXPECT_EQ(j.at("per_token_symbol"), "s");
  EXPECT_EQ(j.at("gpu").at("name"), "H200");
  EXPECT_TRUE(has(j.at("estimate").get<std::string>(), "ESTIMATE")) << r.out;
}

TEST(PlanCli, A100UsesItsOwnPeaks) {
  CliResult r = run_plan("plan " + two_gemms() + " --bind s=512 --gpu a100 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // (102400 + 50176) B / 2.0 TB/s; compute is well under that at 312 TFLOP/s.
  Json j = cli_json(r);
  EXPECT_DOUBLE_EQ(j.at("total").at("roofline_seconds").get<double>(), 7.6288e-08);
  EXPECT_EQ(j.at("gpu").at("name"), "A100");
}

TEST(PlanCli, ZeroTokensLaunchNothing) {
  CliResult r = run_plan("plan " + two_gemms() + " --bind s=0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = cli_json(r);
  EXPECT_EQ(j.at("total").at("launches"), 0);
  EXPECT_EQ(j.at("total").at("flops"), 0);
  ASSERT_FALSE(j.at("kernels").empty());
  for (const Json& k : j.at("kernels")) EXPECT_EQ(k.at("launched"), false) << r.out;
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
  Json j = cli_json(r);
  EXPECT_EQ(j.at("per_token_symbol"), "s77");
  // The forward's tensor-core contractions: 3 base GEMMs (2*512*2048*1024 each) and the rank-r
  // split-K products x @ A^T in f32 on a bf16 split (2*512*2048*16 for gate and up, 2*512*1024*16
  // for down: Note [Rank-r split-K on tensor cores]); the products in the GEMMs' epilogues count
  // as FMA work.
  EXPECT_EQ(j.at("total").at("tensor_flops"), 6442450944 + 2 * 33554432 + 16777216) << r.out;
}

// A number from the "total" object of plan --json.
double total_field(const CliResult& r, const std::string& field) {
  return cli_json(r).at("total").at(field).get<double>();
}

TEST(PlanCli, FusionKeepsFlopsAndCutsLaunchesAndBytes) {
  const std::string unfused =
      " --disable-pass split_weight_grads --disable-pass hoist_gemm_scale --disable-pass "
      "concat_gemm_k --disable-pass fuse_lora_linear --disable-pass fuse_gate_up --disable-pass "
      "fuse_operand_views --disable-pass fuse_pointwise --disable-pass fuse_epilogue_producers "
      "--disable-pass group_independent_gemms";
  for (const char* graph : {"seed_expert_mlp", "seed_expert_mlp_backward"}) {
    SCOPED_TRACE(graph);
    const std::string file = fixture_path(std::string(graph) + ".dgir");
    CliResult f = run_plan("plan " + file + " --bind s77=512 --json");
    CliResult u = run_plan("plan " + file + " --bind s77=512 --json" + unfused);
    ASSERT_EQ(f.exit_code, 0) << f.out;
    ASSERT_EQ(u.exit_code, 0) << u.out;
    EXPECT_LT(total_field(f, "launches"), total_field(u, "launches"));
    EXPECT_LT(total_field(f, "bytes"), total_field(u, "bytes"));
    EXPECT_LT(total_field(f, "estimated_seconds"), total_field(u, "estimated_seconds"));
    // The same contractions either way (the weight-gradient reduction counts no graph node), as
    // many on tensor cores or more: the fused backward's weight gradients multiply their f32
    // operands there too (Note [Weight-gradient products on tensor cores]).
    if (std::string(graph) == "seed_expert_mlp")
      EXPECT_EQ(total_field(f, "tensor_flops"), total_field(u, "tensor_flops"));
    else
      EXPECT_GT(total_field(f, "tensor_flops"), total_field(u, "tensor_flops"));
  }
}

// Note [Grouped GEMMs]: the seed backward's rank-r products of the gate and up gradients run as
// one launch (split-K partials whose last block reduces, Note [Last block reduces]);
// --disable-pass group_independent_gemms gives them a launch each, with the same work.
TEST(PlanCli, GroupedRankRProductsSaveALaunch) {
  const std::string file = fixture_path("seed_expert_mlp_backward.dgir");
  CliResult grouped = run_plan("plan " + file + " --bind s77=512 --json");
  CliResult split =
      run_plan("plan " + file + " --bind s77=512 --json --disable-pass group_independent_gemms");
  ASSERT_EQ(grouped.exit_code, 0) << grouped.out;
  ASSERT_EQ(split.exit_code, 0) << split.out;
  EXPECT_EQ(total_field(grouped, "launches"), 5) << grouped.out;
  EXPECT_EQ(total_field(split, "launches"), 6) << split.out;
  EXPECT_TRUE(has(grouped.out, "grouped_fused_matmul")) << grouped.out;
  EXPECT_FALSE(has(split.out, "grouped_fused_matmul")) << split.out;
  for (const char* field : {"flops", "tensor_flops", "bytes"})
    EXPECT_EQ(total_field(grouped, field), total_field(split, field)) << field;
}

// compile --json: each kernel's symbolic FLOPs and bytes, totals, and ptxas's report, also when
// the binary comes from the disk cache (a second process).
TEST(PlanCli, CompileJsonShowsCostsAndPtxasReport) {
  dg::testing::TempDir tmp;
  const std::string dir = tmp / "cache";
  for (const char* tier : {"none", "disk"}) {
    SCOPED_TRACE(tier);
    CliResult r = run_cli("compile " + two_gemms() + " --arch sm_80 --json --cache-dir " + dir);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    Json j = cli_json(r);
    EXPECT_EQ(j.at("cache_tier"), tier);
    EXPECT_EQ(j.at("total_flops"), "5120*s0");
    EXPECT_EQ(j.at("total_tensor_flops"), "5120*s0");
    EXPECT_EQ(j.at("total_bytes"), "288*s0 + 5120");
    const Json& k0 = j.at("kernels").at(0);
    EXPECT_EQ(k0.at("nodes"), Json::array({0}));
    EXPECT_EQ(k0.at("ops"), Json::array({"linear"}));
    EXPECT_EQ(k0.at("flops"), "4096*s0");
    int fallbacks = 0;
    for (const Json& k : j.at("kernels")) {
      const Json& ptxas = k.at("ptxas");
      // Note [Fallbacks compiled on first need]: not in this binary, so not in its report.
      if (k.at("fallback") == true) {
        EXPECT_TRUE(ptxas.is_null()) << r.out;
        ++fallbacks;
        continue;
      }
      ASSERT_TRUE(ptxas.is_object()) << r.out;
      EXPECT_EQ(ptxas.at("arch"), "sm_80");
      EXPECT_TRUE(ptxas.at("registers").is_number_integer());
      EXPECT_EQ(ptxas.at("spill_store_bytes"), 0);
      EXPECT_EQ(ptxas.at("spill_load_bytes"), 0);
    }
    EXPECT_EQ(fallbacks, 2) << "one per GEMM";
  }
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
