// The emulation's adversarial modes and stricter checks (Note [Adversarial emulation]): seeded
// random schedules, poisoned static shared memory, the race detector on cp.async, call-site
// matching of warp collectives, shared-memory address checks, and the options' errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tests/emu/emu_test_util.h"

namespace dg::emu::testing {
namespace {

constexpr const char* kAdversarialKernels = R"cuda(
#include "dg_device.cuh"

// Reads static shared memory before writing it, then writes it: every block must see the poison.
extern "C" __global__ void read_before_write(unsigned* __restrict__ out) {
  __shared__ float f[4];
  __shared__ unsigned u;
  if (threadIdx.x == 0) {
    for (int i = 0; i < 4; ++i) out[5 * blockIdx.x + i] = __float_as_uint(f[i]);
    out[5 * blockIdx.x + 4] = u;
    for (int i = 0; i < 4; ++i) f[i] = 1.0f;
    u = 0;
  }
}
DG_EMU_ENTRY(read_before_write)

// The order in which the threads of one block come out of a barrier.
extern "C" __global__ void barrier_order(int* __restrict__ order, int* __restrict__ counter) {
  __syncthreads();
  order[atomicAdd(counter, 1)] = (int)threadIdx.x;
}
DG_EMU_ENTRY(barrier_order)

// Half a warp at one __syncwarp, half at another: divergent on a GPU.
extern "C" __global__ void divergent_syncwarp(int* __restrict__ out) {
  if (threadIdx.x < 16) {
    __syncwarp();
  } else {
    __syncwarp();
  }
  out[threadIdx.x] = 1;
}
DG_EMU_ENTRY(divergent_syncwarp)

// ldmatrix with a global-memory address.
extern "C" __global__ void ldmatrix_global(const dg_bf16* __restrict__ g,
                                           unsigned* __restrict__ out) {
  dg_u32 r[4];
  dg_ldmatrix_x4(r, g + 8 * (threadIdx.x % 8));
  out[threadIdx.x] = r[0];
}
DG_EMU_ENTRY(ldmatrix_global)

// Threads 0 and 32 copy into the same 16 bytes of dynamic shared memory, with or without a
// barrier between their copies.
extern "C" __global__ void two_copies(const float* __restrict__ src, float* __restrict__ out,
                                      int barrier) {
  float* s = DG_DYNAMIC_SMEM(float);
  if (threadIdx.x == 0) {
    dg_cp_async_16(s, src);
    dg_cp_async_commit();
    dg_cp_async_wait<0>();
  }
  if (barrier) __syncthreads();
  if (threadIdx.x == 32) {
    dg_cp_async_16(s, src + 4);
    dg_cp_async_commit();
    dg_cp_async_wait<0>();
  }
  __syncthreads();
  if (threadIdx.x < 4) out[threadIdx.x] = s[threadIdx.x];
}
DG_EMU_ENTRY(two_copies)

extern "C" __global__ void always_traps() { __trap(); }
DG_EMU_ENTRY(always_traps)
)cuda";

const EmuModule& adversarial() { return test_module(kAdversarialKernels); }

TEST(EmuAdversarial, StaticSharedMemoryIsPoisonedForEveryBlock) {
  std::vector<unsigned> out(5 * 6, 0);
  unsigned* p = out.data();
  for (int launch_no = 0; launch_no < 2; ++launch_no) {
    ASSERT_EQ(launch(adversarial(), "read_before_write", grid1d(6, 32), p), "");
    for (unsigned v : out) EXPECT_EQ(v, 0xffffffffu);  // f32 NaN, and -1 as an integer
  }
}

std::vector<int> barrier_order(const std::string& sched, const std::string& seed) {
  const ScopedEnv env({{"DYNGEN_EMU_SCHED", sched}, {"DYNGEN_EMU_SEED", seed}});
  std::vector<int> order(128, -1);
  int counter = 0;
  int* po = order.data();
  int* pc = &counter;
  EXPECT_EQ(launch(adversarial(), "barrier_order", grid1d(1, 128), po, pc), "");
  return order;
}

TEST(EmuAdversarial, RandomScheduleIsSeededAndReproducible) {
  const std::vector<int> fifo = barrier_order("fifo", "0");
  // FIFO: the last thread to arrive goes on at once, then the others in arrival order.
  EXPECT_EQ(fifo[0], 127);
  for (int i = 1; i < 128; ++i) EXPECT_EQ(fifo[i], i - 1);
  const std::vector<int> r1 = barrier_order("random", "1");
  EXPECT_EQ(barrier_order("random", "1"), r1);
  EXPECT_NE(barrier_order("random", "2"), r1);
  EXPECT_NE(r1, fifo);
  std::vector<int> sorted = r1;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 128; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(EmuAdversarial, WarpCollectivesMatchByCallSite) {
  std::vector<int> out(32, 0);
  int* p = out.data();
  const std::string err = launch(adversarial(), "divergent_syncwarp", grid1d(1, 32), p);
  EXPECT_NE(err.find("different call sites"), std::string::npos) << err;
}

TEST(EmuAdversarial, LdmatrixNeedsSharedMemory) {
  std::vector<uint16_t> g(64, 0);  // operator new aligns to 16 bytes
  std::vector<unsigned> out(32);
  const void* pg = g.data();
  unsigned* po = out.data();
  const std::string err = launch(adversarial(), "ldmatrix_global", grid1d(1, 32), pg, po);
  EXPECT_NE(err.find("ldmatrix row address is not in shared memory"), std::string::npos) << err;
}

TEST(EmuAdversarial, RaceDetectorFindsTwoCopiesInOneInterval) {
  alignas(16) float src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> out(4, 0.0f);
  const float* ps = src;
  float* po = out.data();
  for (const char* sched : {"fifo", "random"}) {
    const ScopedEnv env({{"DYNGEN_EMU_RACECHECK", "1"}, {"DYNGEN_EMU_SCHED", sched}});
    int barrier = 1;
    EXPECT_EQ(launch(adversarial(), "two_copies", grid1d(1, 64, 16), ps, po, barrier), "");
    EXPECT_EQ(out, (std::vector<float>{5, 6, 7, 8}));
    barrier = 0;
    const std::string err = launch(adversarial(), "two_copies", grid1d(1, 64, 16), ps, po, barrier);
    EXPECT_NE(err.find("two_copies: shared-memory race in block (0,0,0): "), std::string::npos)
        << err;
    EXPECT_NE(err.find("thread (0,0,0) [warp 0 lane 0] wrote (cp.async)"), std::string::npos)
        << err;
    EXPECT_NE(err.find("thread (32,0,0) [warp 1 lane 0] wrote (cp.async)"), std::string::npos)
        << err;
    EXPECT_NE(err.find("dynamic shared memory offset 0"), std::string::npos) << err;
  }
  // Without the detector the same launch runs (its result is whichever copy landed last).
  const ScopedEnv env({{std::string("DYNGEN_EMU_RACECHECK"), std::string("0")}});
  int barrier = 0;
  EXPECT_EQ(launch(adversarial(), "two_copies", grid1d(1, 64, 16), ps, po, barrier), "");
}

TEST(EmuAdversarial, FailuresNameTheSettingsThatReproduceThem) {
  const ScopedEnv env({{"DYNGEN_EMU_SCHED", "random"},
                       {"DYNGEN_EMU_ASYNC", "issue"},
                       {"DYNGEN_EMU_SEED", "42"},
                       {"DYNGEN_EMU_RACECHECK", "0"}});
  const std::string err = launch(adversarial(), "always_traps", grid1d(1, 1));
  EXPECT_NE(err.find("__trap()"), std::string::npos) << err;
  EXPECT_NE(err.find("[DYNGEN_EMU_SCHED=random DYNGEN_EMU_ASYNC=issue DYNGEN_EMU_SEED=42 "
                     "DYNGEN_EMU_RACECHECK=0]"),
            std::string::npos)
      << err;
}

TEST(EmuAdversarial, InvalidSettingsAreClearErrors) {
  const std::pair<const char*, const char*> bad[] = {{"DYNGEN_EMU_SCHED", "lifo"},
                                                     {"DYNGEN_EMU_ASYNC", "never"},
                                                     {"DYNGEN_EMU_SEED", "-3"},
                                                     {"DYNGEN_EMU_SEED", "12x"},
                                                     {"DYNGEN_EMU_RACECHECK", "yes"}};
  for (const auto& [name, value] : bad) {
    const ScopedEnv env({{std::string(name), std::string(value)}});
    const std::string err = launch(adversarial(), "always_traps", grid1d(1, 1));
    EXPECT_NE(err.find(std::string(name) + "='" + value + "' is invalid"), std::string::npos)
        << err;
  }
}

}  // namespace
}  // namespace dg::emu::testing
