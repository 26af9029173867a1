// setmaxnreg under the host emulation (Note [Warpgroup register counts] in
// codegen/device/dg_wgmma_sm90.cuh): a block whose producer warpgroup gives registers back while
// its consumer warpgroups take them runs to the end under every scheduling mode, and the PTX ISA's
// rules are errors when broken: a warpgroup whose warps execute different setmaxnreg, a warp that
// leaves without it, a count out of range or off the step of 8, an inc that lowers the limit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/emu/emu_test_util.h"

namespace dg::emu::testing {
namespace {

constexpr const char* kSetmaxnregKernels = R"cuda(
#include "dg_device.cuh"
#include "dg_wgmma_sm90.cuh"

// The main loop's split (dg_gemm_sm90.cuh): the last warpgroup decreases, the others increase,
// then twice more in every warpgroup after a block barrier (a dec to the producer's 40, which
// leaves it where it is, and an inc); each thread writes its warpgroup's index after each step.
extern "C" __global__ void __launch_bounds__(384, 1) rebalance(int* out) {
  const int wg = threadIdx.x / 128;
  if (wg == 2) dg_setmaxnreg_dec<40>();
  else dg_setmaxnreg_inc<232>();
  out[threadIdx.x] = wg;
  __syncthreads();
  dg_setmaxnreg_dec<40>();
  dg_setmaxnreg_inc<128>();
  out[384 + threadIdx.x] = wg;
}
DG_EMU_ENTRY(rebalance)

// Warp 3 of the warpgroup takes the other branch: a different instruction.
extern "C" __global__ void __launch_bounds__(128, 1) split_warpgroup(int* out) {
  if (threadIdx.x / 32 == 3) dg_setmaxnreg_dec<40>();
  else dg_setmaxnreg_inc<232>();
  out[threadIdx.x] = 1;
}
DG_EMU_ENTRY(split_warpgroup)

// Warp 0 leaves first; the others wait for it at setmaxnreg.
extern "C" __global__ void __launch_bounds__(128, 1) warp_leaves(int* out) {
  if (threadIdx.x / 32 == 0) return;
  dg_setmaxnreg_inc<232>();
  out[threadIdx.x] = 1;
}
DG_EMU_ENTRY(warp_leaves)

// The twin's own checks, which dg_setmaxnreg_inc's static_assert keeps from device code.
extern "C" __global__ void __launch_bounds__(128, 1) bad_count(int regs, int inc) {
  ::dg::emu::setmaxnreg(inc != 0, regs);
}
DG_EMU_ENTRY(bad_count)

// An inc below the limit the warpgroup set before.
extern "C" __global__ void __launch_bounds__(128, 1) inc_lowers(int* out) {
  dg_setmaxnreg_inc<200>();
  dg_setmaxnreg_inc<120>();
  out[threadIdx.x] = 1;
}
DG_EMU_ENTRY(inc_lowers)
)cuda";

const EmuModule& setmaxnreg_module() { return test_module(kSetmaxnregKernels); }

TEST(EmuSetmaxnreg, ProducerAndConsumerWarpgroupsRebalanceAndRunToTheEnd) {
  const std::vector<std::vector<std::pair<std::string, std::string>>> modes = {
      {}, {{"DYNGEN_EMU_SCHED", "random"}, {"DYNGEN_EMU_SEED", "5"}}};
  for (const auto& mode : modes) {
    ScopedEnv env(mode);
    std::vector<int> out(2 * 384, -1);
    int* po = out.data();
    ASSERT_EQ(launch(setmaxnreg_module(), "rebalance", grid1d(3, 384), po), "");
    for (int i = 0; i < 2 * 384; ++i) ASSERT_EQ(out[i], (i % 384) / 128) << i;
  }
}

TEST(EmuSetmaxnreg, BrokenRulesAreErrors) {
  std::vector<int> out(128, 0);
  int* po = out.data();
  EXPECT_NE(launch(setmaxnreg_module(), "split_warpgroup", grid1d(1, 128), po)
                .find("the warps of a warpgroup execute different setmaxnreg"),
            std::string::npos);
  const std::string left = launch(setmaxnreg_module(), "warp_leaves", grid1d(1, 128), po);
  EXPECT_NE(left.find("exited without executing this setmaxnreg"), std::string::npos) << left;
  EXPECT_NE(launch(setmaxnreg_module(), "inc_lowers", grid1d(1, 128), po)
                .find("setmaxnreg.inc below the warp's current register limit"),
            std::string::npos);
  for (int regs : {16, 260, 100}) {
    int inc = 1;
    EXPECT_NE(launch(setmaxnreg_module(), "bad_count", grid1d(1, 128), regs, inc)
                  .find("multiple of 8 in [24, 256]"),
              std::string::npos)
        << regs;
  }
  int regs = 232, inc = 1;
  EXPECT_EQ(launch(setmaxnreg_module(), "bad_count", grid1d(1, 128), regs, inc), "");
  EXPECT_NE(launch(setmaxnreg_module(), "bad_count", grid1d(1, 96), regs, inc).find("warpgroups"),
            std::string::npos);
}

}  // namespace
}  // namespace dg::emu::testing
