// Every kernel generated for the backward graphs compiles with NVRTC for sm_80 and sm_90a with
// no register spills (read from ptxas's verbose report); the seed backward's kernel count
// (BackwardPlan).
#include <gtest/gtest.h>

#include "codegen/emit_cuda.h"
#include "ir/text_format.h"
#include "passes/pipeline.h"
#include "runtime/emu/device_headers.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/common/fixtures.h"
#include "tests/common/plan_ptxas_log.h"
#include "tests/common/ptxas_spills.h"

namespace dg {
namespace {

Graph load(const std::string& name) { return testing::load_fixture(name); }

// The seed's backward in at most six kernels: the down LoRA's rank-r product (one split-K
// kernel whose last CTA per row tile sums the partials, Note [Last block reduces]); the down GEMM
// with the SwiGLU backward in its epilogue; the gate and up rank-r products as one grouped kernel
// (Note [Grouped GEMMs]); grad_x's four terms in one GEMM; the weight gradients' two kernels.
TEST(BackwardPlan, SeedBackwardRunsAsAtMostSixKernels) {
  KernelPlan plan = emit_cuda(run_pipeline(load("seed_expert_mlp_backward.dgir")));
  std::string listing;
  int grouped = 0, tensor_core = 0;
  for (const KernelLaunch& k : plan.kernels) {
    listing += k.name + ": " + k.summary + "\n";
    grouped += k.variant == 0 && k.name.find("grouped") != std::string::npos;
    tensor_core += k.variant == 0 && k.summary.find("[tensor cores") != std::string::npos;
  }
  EXPECT_LE(launch_sites(plan), 6u) << listing;  // tile variants of a GEMM count once
  EXPECT_EQ(grouped, 1) << listing;              // the grouped split-K rank-r kernel
  EXPECT_EQ(tensor_core, 2) << listing;
  PipelineOptions without;
  without.disabled = {"group_independent_gemms"};
  EXPECT_EQ(launch_sites(emit_cuda(run_pipeline(load("seed_expert_mlp_backward.dgir"), without))),
            launch_sites(plan) + 1);
}

class BackwardSpills : public ::testing::TestWithParam<std::string> {};

TEST_P(BackwardSpills, EveryKernelCompilesWithoutSpills) {
  for (const char* fixture : {"seed_expert_mlp_backward.dgir", "seed_expert_mlp_backward_aot.dgir",
                              "dbrx_expert_backward.dgir"}) {
    KernelPlan plan = emit_cuda(run_pipeline(load(fixture)));
    CompileOptions opts;
    opts.arch = GetParam();
    opts.extra_options = {"--ptxas-options=-v"};
    auto log = testing::plan_ptxas_log(plan, opts);
    ASSERT_TRUE(log.ok()) << fixture << ": " << log.message();
    int kernels = 0;
    EXPECT_EQ(testing::spilled_kernels(log.value(), &kernels), "") << fixture;
    if (std::string(fixture).find("seed") == 0) {  // the seed's six weight gradients: one group
      EXPECT_NE(log->find("wgrad_partials"), std::string::npos) << fixture;
    }
    EXPECT_EQ(kernels, static_cast<int>(plan.kernels.size())) << fixture << "\n" << log.value();
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, BackwardSpills, ::testing::Values("sm_80", "sm_90a"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dg
