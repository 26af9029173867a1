// `dyngen plan`'s performance model through the CLI: the JSON contract (Note [Plan figures in
// JSON]) parses and its fields agree with each other (waves from CTAs and occupancy, estimate >=
// roofline, totals and ratio), a launch with fewer CTAs than SMs is charged for the idle SMs, the
// eager baseline counts the unfused graph's ATen calls, a missing SASS is reported rather than
// guessed, and bad --baseline / --gpu / --arch values exit 2. No wall-clock time is asserted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "tests/common/cli_json.h"
#include "tests/common/cli_process.h"
#include "tests/common/source_tree.h"
#include "tests/common/temp_dir.h"

namespace {

using dg::testing::cli_json;
using dg::testing::CliResult;
using dg::testing::has;
using dg::testing::run_cli;
using Json = nlohmann::json;

std::string fixture(const std::string& name) { return dg::testing::fixture_path(name + ".dgir"); }

// One cache folder for this process's compiles.
std::string cache_dir() {
  static const dg::testing::TempDir dir;
  return dir.path();
}

// `cuobjdump`: a value for DYNGEN_CUOBJDUMP in the child's environment, "" to leave it.
CliResult plan(const std::string& args, const std::string& cuobjdump = "") {
  if (!cuobjdump.empty()) setenv("DYNGEN_CUOBJDUMP", cuobjdump.c_str(), 1);
  CliResult r = run_cli("plan " + args + " --cache-dir " + cache_dir());
  if (!cuobjdump.empty()) unsetenv("DYNGEN_CUOBJDUMP");
  return r;
}

Json plan_json(const std::string& args, const std::string& cuobjdump = "") {
  CliResult r = plan(args + " --json", cuobjdump);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return cli_json(r);
}

// The number at `key` of the object `j` (nlohmann::json::out_of_range when there is none).
double num(const Json& j, const char* key) { return j.at(key).get<double>(); }

void expect_consistent(const Json& j) {
  double sms = num(j.at("gpu"), "sms");
  ASSERT_GT(sms, 0);
  double sum = 0;
  bool sass = j.at("model").at("sass").get<bool>();
  for (const Json& k : j.at("kernels")) {
    SCOPED_TRACE(k.at("name").get<std::string>());
    for (const char* f : {"name", "flops", "ctas", "waves", "ctas_per_sm", "instructions_per_mma",
                          "estimated_seconds", "roofline_seconds", "bounds", "limiter"})
      EXPECT_TRUE(k.contains(f)) << f;
    if (!k.at("launched").get<bool>()) continue;
    double ctas = num(k, "ctas"), per_sm = num(k, "ctas_per_sm");
    ASSERT_GT(per_sm, 0);
    EXPECT_EQ(num(k, "waves"), std::ceil(ctas / (sms * per_sm)));
    double est = num(k, "estimated_seconds"), roof = num(k, "roofline_seconds");
    EXPECT_GE(est, roof);
    const Json& b = k.at("bounds");
    // estimated = launch + the largest bound, the roofline or the phases' figure (printed to 6
    // digits).
    // Note [Epilogue MMAs]: the epilogue's rank-r MMAs join the compute bound.
    double bounds = std::max(
        num(b, "tensor_seconds") + num(b, "epilogue_tensor_seconds") + num(b, "simt_seconds"),
        num(b, "memory_seconds"));
    if (sass) {
      bounds = std::max(
          {bounds, num(b, "issue_seconds"), num(b, "latency_seconds"), num(b, "shared_seconds")});
    }
    EXPECT_NEAR(num(k, "overlapped_seconds"), bounds, 1e-5 * bounds);
    double top = std::max(bounds, roof);
    if (sass) {
      // Note [Phases in series]: a kernel with a main MMA loop is also timed as its three
      // phases, between the overlapped bounds and their sum.
      const Json& phases = k.at("phases");
      EXPECT_EQ(phases.size(), num(k, "tensor_flops") > 0 ? 3u : 0u);
      if (!phases.empty()) {
        double sum = 0;
        for (const Json& p : phases) sum += num(p, "seconds");
        double phased = num(k, "phased_seconds");
        EXPECT_GE(phased * (1 + 1e-5), num(k, "overlapped_seconds"));
        EXPECT_LE(phased, sum * (1 + 1e-5));
        top = std::max(top, phased);
      }
    }
    EXPECT_NEAR(est, num(b, "launch_seconds") + top, 1e-5 * est);
    // Note [Tensor-core ceiling]: no kernel's tensor-core work is modelled faster than 0.73 of the
    // dense peak, cuBLAS's measured share.
    if (num(k, "tensor_flops") > 0) {
      EXPECT_LE(num(k, "tensor_flops") / (est - num(b, "launch_seconds")),
                0.73 * num(j.at("gpu"), "tensor_flops_per_s") * (1 + 1e-5));
      EXPECT_LE(num(k, "tensor_fraction"), 0.73);
    }
    // A compute-bound launch with fewer CTAs than SMs runs on ctas SMs only.
    if (ctas < sms && k.at("bound").get<std::string>() == "compute") {
      EXPECT_GE((num(b, "tensor_seconds") + num(b, "simt_seconds")) * (1 + 1e-5),
                roof * sms / ctas);
    }
    EXPECT_EQ(k.at("underfills_gpu").get<bool>(), num(k, "flops") > 50e6 && ctas < sms);
    if (sass) {
      // Tensor-core kernels have a main MMA loop, with at least one instruction per MMA.
      EXPECT_EQ(k.at("instructions_per_mma").is_null(), num(k, "tensor_flops") == 0);
      if (!k.at("instructions_per_mma").is_null()) {
        EXPECT_GE(num(k, "instructions_per_mma"), 1);
      }
    }
    sum += est;
  }
  EXPECT_NEAR(num(j.at("total"), "estimated_seconds"), sum, 1e-5 * sum);
  EXPECT_GE(num(j.at("total"), "estimated_seconds"), num(j.at("total"), "roofline_seconds"));
}

TEST(PlanModel, ContractFieldsAgreeForTheSeedGraphs) {
  for (const char* graph : {"seed_expert_mlp", "seed_expert_mlp_backward"}) {
    for (const char* s : {"512", "4096"}) {
      SCOPED_TRACE(std::string(graph) + " s77=" + s);
      Json j = plan_json(fixture(graph) + " --bind s77=" + s + " --gpu h200 --baseline eager");
      EXPECT_EQ(j.at("model").at("arch").get<std::string>(), "sm_90a");
      EXPECT_TRUE(j.at("model").at("missing").empty()) << "cuobjdump is expected in .venv";
      expect_consistent(j);
      double total = num(j.at("total"), "estimated_seconds");
      double eager = num(j.at("baseline"), "estimated_seconds");
      EXPECT_GT(eager, 0);
      EXPECT_NEAR(num(j, "ratio"), total / eager, 1e-5 * num(j, "ratio"));
    }
  }
}

// The Phi-3.5-MoE-shaped expert (hidden 4096, ffn 6400, r 16) plans too, forward and backward.
TEST(PlanModel, ContractFieldsAgreeForThePhiShapedGraphs) {
  for (const char* graph : {"phi35moe_expert_mlp", "phi35moe_expert_mlp_backward"}) {
    SCOPED_TRACE(graph);
    Json j = plan_json(fixture(graph) + " --bind s77=64 --baseline eager");
    expect_consistent(j);
    EXPECT_GT(num(j, "ratio"), 0);
  }
}

// Note [Rank-r products]: at 512 tokens the rank-r products (N = 16 or 2 x 16, K = 1024 to 6400)
// split K so that they launch at least one CTA per SM of the H200, forward and backward, and no
// GEMM is left on the 64x64 scalar tile.
TEST(PlanModel, RankProductsFillTheH200At512Tokens) {
  for (const char* graph : {"seed_expert_mlp", "seed_expert_mlp_backward", "phi35moe_expert_mlp",
                            "phi35moe_expert_mlp_backward"}) {
    SCOPED_TRACE(graph);
    Json j = plan_json(fixture(graph) + " --bind s77=512 --gpu h200");
    int rank_kernels = 0;
    for (const Json& k : j.at("kernels")) {
      const std::string summary = k.at("summary").get<std::string>();
      SCOPED_TRACE(k.at("name").get<std::string>());
      EXPECT_FALSE(has(summary, "scalar tile"));
      if (!has(summary, "[rank-r split-K")) continue;
      ++rank_kernels;
      EXPECT_GE(num(k, "ctas"), num(j.at("gpu"), "sms"));
    }
    EXPECT_EQ(rank_kernels, 2);
  }
}

// The bars for the model's estimate against eager on an H200, forward plus backward: the seed's
// OLMoE-shaped expert at most 0.40 at 512 tokens and 0.60 at 4096; Phi-3.5-MoE's at most 1.0 at
// 64 tokens, 0.65 at 512 and at 4096 (0.642 there with the weight-gradient partials on tensor
// cores, Note [Weight-gradient products on tensor cores], the epilogue's rank-r MMAs timed as
// tensor work, Note [Epilogue MMAs], and the epilogue operands loaded together, Note [Epilogue
// operand loads]; 0.763 two sessions before).
// They hold because the main loop
// is lean (Note [Lean main loop]), the forward's GEMMs run wgmma fed by TMA where their tiles fill
// the GPU (Note [sm_90a GEMMs]; at 4096 tokens both LoRA-fused GEMMs do), the rank-r epilogues
// read staged operands (Note [Staged rank-r epilogue]), which every LoRA-fused tensor-core kernel
// of these graphs says in its summary, and every kernel with more than 50 MFLOP launches at least
// a block per SM at 512 tokens (Note [Tile choice]).
TEST(PlanModel, ExpertsBeatTheEagerEstimateOnTheH200) {
  struct Bar {
    const char* forward;
    const char* backward;
    int tokens;
    double max_ratio;
  };
  const Bar bars[] = {{"seed_expert_mlp", "seed_expert_mlp_backward", 512, 0.40},
                      {"seed_expert_mlp", "seed_expert_mlp_backward", 4096, 0.60},
                      {"phi35moe_expert_mlp", "phi35moe_expert_mlp_backward", 64, 1.0},
                      {"phi35moe_expert_mlp", "phi35moe_expert_mlp_backward", 512, 0.65},
                      {"phi35moe_expert_mlp", "phi35moe_expert_mlp_backward", 4096, 0.65}};
  for (const Bar& bar : bars) {
    SCOPED_TRACE(std::string(bar.forward) + " at " + std::to_string(bar.tokens));
    double dyngen = 0, eager = 0;
    for (const char* graph : {bar.forward, bar.backward}) {
      Json j = plan_json(fixture(graph) + " --bind s77=" + std::to_string(bar.tokens) +
                         " --gpu h200 --baseline eager");
      dyngen += num(j.at("total"), "estimated_seconds");
      eager += num(j.at("baseline"), "estimated_seconds");
      int staged = 0, wgmma = 0;
      for (const Json& k : j.at("kernels")) {
        if (!k.at("launched").get<bool>())
          continue;  // another tile variant runs (Note [Tile choice])
        if (has(k.at("summary").get<std::string>(), "rank-r operands staged")) ++staged;
        if (has(k.at("summary").get<std::string>(), "[wgmma")) ++wgmma;
        // Parallelism: no kernel with more than 50 MFLOP (kUnderfillFlops) has fewer blocks
        // than the GPU has SMs at 512 tokens.
        if (bar.tokens == 512) {
          EXPECT_FALSE(k.at("underfills_gpu").get<bool>()) << graph << " " << k.at("name");
        }
      }
      EXPECT_EQ(staged, 2) << graph << ": its two LoRA-fused GEMMs stage their rank-r operands";
      // At 4096 tokens: both LoRA GEMMs of the forward, and the backward's dgrad of the down
      // projection and dx over the gate and up segments (B N-major), on wgmma.
      if (bar.tokens == 4096) EXPECT_EQ(wgmma, 2) << graph;
    }
    EXPECT_LE(dyngen / eager, bar.max_ratio) << dyngen * 1e6 << " us against " << eager * 1e6;
  }
}

TEST(PlanModel, A100CompilesForSm80AndUsesItsSms) {
  Json j = plan_json(fixture("seed_expert_mlp") + " --bind s77=512 --gpu a100");
  EXPECT_EQ(j.at("model").at("arch").get<std::string>(), "sm_80");
  EXPECT_EQ(num(j.at("gpu"), "sms"), 108);
  EXPECT_FALSE(j.contains("baseline"));
  EXPECT_FALSE(j.contains("ratio"));
  expect_consistent(j);
  Json k = plan_json(fixture("seed_expert_mlp") + " --bind s77=512 --gpu h200 --arch sm_80");
  EXPECT_EQ(k.at("model").at("arch").get<std::string>(), "sm_80");
  expect_consistent(k);
}

// The unfused graphs as eager runs them: the forward fixture has 26 nodes, 3 of them scalar
// constants (23 calls, all kernels); the backward has 44 nodes, 1 scalar constant and 6 permutes
// (43 calls, 37 kernels).
TEST(PlanModel, EagerBaselineCountsTheUnfusedGraphsCalls) {
  Json f = plan_json(fixture("seed_expert_mlp") + " --bind s77=512 --baseline eager");
  EXPECT_EQ(num(f.at("baseline"), "calls"), 23);
  EXPECT_EQ(num(f.at("baseline"), "kernels"), 23);
  Json b = plan_json(fixture("seed_expert_mlp_backward") + " --bind s77=512 --baseline eager");
  EXPECT_EQ(num(b.at("baseline"), "calls"), 43);
  EXPECT_EQ(num(b.at("baseline"), "kernels"), 37);
  for (const Json* j : {&f, &b}) {
    const Json& e = j->at("baseline");
    // The host's dispatches are a floor; the device's work another.
    EXPECT_GE(num(e, "estimated_seconds"), num(e, "host_seconds"));
    EXPECT_GE(num(e, "estimated_seconds"), num(e, "device_seconds") * (1 - 1e-5));
    EXPECT_NEAR(num(e, "host_seconds"), num(e, "calls") * num(e, "dispatch_seconds_per_call"),
                1e-9);
  }
  // More tokens never make eager faster.
  Json big = plan_json(fixture("seed_expert_mlp") + " --bind s77=4096 --baseline eager");
  EXPECT_GT(num(big.at("baseline"), "device_seconds"), num(f.at("baseline"), "device_seconds"));
}

// A cuobjdump that fails: plan still reports, names what it could not fill, and leaves those fields
// null instead of guessing them.
TEST(PlanModel, WithoutSassTheFieldsItNeedsAreNamedAndNull) {
  Json j = plan_json(fixture("seed_expert_mlp") + " --bind s77=512", "/bin/false");
  EXPECT_FALSE(j.at("model").at("sass").get<bool>());
  ASSERT_FALSE(j.at("model").at("missing").empty());
  EXPECT_TRUE(has(j.at("model").at("missing")[0].get<std::string>(), "issue_seconds"));
  for (const Json& k : j.at("kernels")) {
    EXPECT_TRUE(k.at("instructions_per_mma").is_null());
    EXPECT_TRUE(k.at("bounds").at("issue_seconds").is_null());
    EXPECT_TRUE(k.at("bounds").at("latency_seconds").is_null());
    EXPECT_FALSE(k.at("missing").empty());
  }
  expect_consistent(j);
  CliResult text = plan(fixture("seed_expert_mlp") + " --bind s77=512", "/bin/false");
  EXPECT_EQ(text.exit_code, 0) << text.out;
  EXPECT_TRUE(has(text.out, "not filled: ")) << text.out;
}

TEST(PlanModel, TextTableHasTheModelsColumns) {
  CliResult r = plan(fixture("seed_expert_mlp") + " --bind s77=512 --baseline eager");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* col : {"CTAs", "CTA/SM", "waves", "inst/MMA", "roof. us", "est. us", "limiter"})
    EXPECT_TRUE(has(r.out, col)) << col << "\n" << r.out;
  EXPECT_TRUE(has(r.out, "ESTIMATE (a model, not a measurement)")) << r.out;
  EXPECT_TRUE(has(r.out, "baseline: eager PyTorch estimated")) << r.out;
  EXPECT_TRUE(has(r.out, "ratio dyngen / eager = ")) << r.out;
  EXPECT_TRUE(has(r.out, "with fewer CTAs than 132 SMs: ")) << r.out;
}

TEST(PlanModel, BadModelFlagsExitTwo) {
  const std::string g = fixture("seed_expert_mlp") + " --bind s77=512";
  for (const std::string& args : {g + " --baseline cuda", g + " --baseline", g + " --gpu h100",
                                  g + " --arch host", g + " --emit /tmp/x"}) {
    CliResult r = plan(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(has(r.out, "dyngen: ")) << args << "\n" << r.out;
  }
}

}  // namespace
