// Host emulation of the CUDA execution model: threads, blocks, shared memory, barriers, warp
// collectives, atomics, and the errors that broken kernels must produce.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <numeric>
#include <vector>

#include "tests/emu/basic_kernels.h"
#include "tests/emu/emu_test_util.h"

namespace dg::emu::testing {
namespace {

const EmuModule& basic() { return test_module(kBasicKernels); }

TEST(EmuBasic, VectorAddOverRaggedSizes) {
  for (long long n : {1LL, 255LL, 256LL, 257LL, 10007LL}) {
    std::vector<float> a(n), b(n), c(n + 1, -7.0f);
    for (long long i = 0; i < n; ++i) a[i] = 0.5f * i, b[i] = 1.0f - i;
    const float* pa = a.data();
    const float* pb = b.data();
    float* pc = c.data();
    const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
    ASSERT_EQ(launch(basic(), "vadd", grid1d(blocks, 256), pa, pb, pc, n), "") << n;
    for (long long i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << n << " " << i;
    EXPECT_EQ(c[n], -7.0f) << "wrote past the predicated extent";
  }
}

TEST(EmuBasic, BlockReductionsKeepSharedMemoryPerBlock) {
  const long long cols = 1000;
  const unsigned rows = 24;
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 13) - 6.0f;
  std::vector<float> out(2 * rows, 0.0f);
  std::vector<int> clobbered(rows, -1);
  const float* px = x.data();
  float* po = out.data();
  int* pc = clobbered.data();
  ASSERT_EQ(launch(basic(), "row_sums", grid1d(rows, 128), px, po, pc, cols), "");
  for (unsigned r = 0; r < rows; ++r) {
    const float ref = std::accumulate(x.begin() + r * cols, x.begin() + (r + 1) * cols, 0.0f);
    EXPECT_EQ(out[2 * r], ref) << "tree, row " << r;  // small integers: exact in any order
    EXPECT_EQ(out[2 * r + 1], ref) << "dg_block_reduce_sum, row " << r;
    EXPECT_EQ(clobbered[r], 0) << "another block wrote row " << r << "'s __shared__ tag";
  }
}

size_t process_mappings() {
  std::ifstream maps("/proc/self/maps");
  return static_cast<size_t>(
      std::count(std::istreambuf_iterator<char>(maps), std::istreambuf_iterator<char>(), '\n'));
}

// Note [Stack pool]: a block with barriers holds a stack per thread, two mappings each; a pool
// that kept them all held ~600 mappings per module, and the Python suite's few hundred modules
// reached vm.max_map_count (mmap failed: std::bad_alloc in the emulator). At most kKeep stay.
TEST(EmuBasic, ABarrierLaunchLeavesFewMappingsBehind) {
  std::vector<int> out(5, 0);
  int* po = out.data();
  const size_t before = process_mappings();
  ASSERT_EQ(launch(basic(), "barrier_votes", grid1d(2, 1024), po), "");
  EXPECT_EQ(out[4], 0);
  EXPECT_LT(process_mappings(), before + 64) << "the 1024 threads' stacks are still mapped";
}

TEST(EmuBasic, WarpShufflesAndVotes) {
  const int n = 64;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>((i * 5) % 17) - (i < 32 ? 3.0f : -1.0f);
  std::vector<float> out(9 * n);
  std::vector<unsigned> votes(6);
  const float* px = x.data();
  float* po = out.data();
  unsigned* pv = votes.data();
  ASSERT_EQ(launch(basic(), "warp_ops", grid1d(1, n), px, po, pv), "");
  for (int w = 0; w < 2; ++w) {
    const float* xs = &x[32 * w];
    const float sum = std::accumulate(xs, xs + 32, 0.0f);
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l) ballot |= (xs[l] > 0.0f ? 1u : 0u) << l;
    EXPECT_EQ(votes[3 * w], ballot);
    EXPECT_EQ(votes[3 * w + 1], 0u);
    EXPECT_EQ(votes[3 * w + 2], 1u);
    float scan = 0.0f;
    for (int l = 0; l < 32; ++l) {
      const float* o = &out[9 * (32 * w + l)];
      scan += xs[l];
      EXPECT_EQ(o[0], sum) << l;
      if (l == 0) {
        EXPECT_EQ(o[1], sum);
      }
      EXPECT_EQ(o[2], scan) << l;
      EXPECT_EQ(o[3], xs[3]) << l;
      EXPECT_EQ(o[4], xs[l ^ 1]) << l;
      EXPECT_EQ(o[5], xs[(l & ~7) + 2]) << l;
      EXPECT_EQ(o[6], static_cast<float>(10 * ((l % 16) + 4 < 16 ? l + 4 : l))) << l;
      EXPECT_EQ(o[7], *std::max_element(xs, xs + 32)) << l;
      EXPECT_EQ(o[8], static_cast<float>(l ^ 31)) << l;
    }
  }
}

TEST(EmuBasic, AtomicsFromManyBlocks) {
  const long long n = 100003;
  float fsum = 0.0f;
  int count = 0, imax = -1;
  unsigned long long isum = 0;
  float* pf = &fsum;
  int* pc = &count;
  unsigned long long* ps = &isum;
  int* pm = &imax;
  ASSERT_EQ(launch(basic(), "atomics", grid1d((n + 127) / 128, 128), pf, pc, ps, pm, n), "");
  EXPECT_EQ(fsum, static_cast<float>(n));
  EXPECT_EQ(count, n);
  EXPECT_EQ(isum, static_cast<unsigned long long>(n) * (n - 1) / 2);
  EXPECT_EQ(imax, n - 1);
}

TEST(EmuBasic, DynamicSharedMemory) {
  const long long n = 1000;
  const unsigned threads = 96;
  std::vector<float> x(n), y(n, 0.0f);
  std::iota(x.begin(), x.end(), 1.0f);
  const float* px = x.data();
  float* py = y.data();
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  ASSERT_EQ(launch(basic(), "reverse_blocks", grid1d(blocks, threads, threads * sizeof(float)), px,
                   py, n),
            "");
  for (long long i = 0; i < n; ++i) {
    const long long base = i / threads * threads, src = base + threads - 1 - (i - base);
    EXPECT_EQ(y[i], src < n ? x[src] : 0.0f) << i;
  }
}

TEST(EmuBasic, ThreeDimensionalIndices) {
  const DgEmuLaunch cfg{2, 3, 2, 4, 2, 3, 0};
  const unsigned per_block = 4 * 2 * 3, blocks = 2 * 3 * 2;
  std::vector<unsigned> out(per_block * blocks, ~0u);
  unsigned* po = out.data();
  ASSERT_EQ(launch(basic(), "index3d", cfg, po), "");
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 3; ++by)
      for (unsigned bx = 0; bx < 2; ++bx)
        for (unsigned tz = 0; tz < 3; ++tz)
          for (unsigned ty = 0; ty < 2; ++ty)
            for (unsigned tx = 0; tx < 4; ++tx) {
              const unsigned block = bx + 2 * (by + 3 * bz), thread = tx + 4 * (ty + 2 * tz);
              EXPECT_EQ(out[block * per_block + thread],
                        (bz << 24) | (by << 20) | (bx << 16) | (tz << 8) | (ty << 4) | tx);
            }
}

TEST(EmuBasic, BarriersThatCount) {
  std::vector<int> out(5, 0);
  int* po = out.data();
  ASSERT_EQ(launch(basic(), "barrier_votes", grid1d(3, 160), po), "");
  EXPECT_EQ(out[0], (160 + 2) / 3);
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 1);
  EXPECT_EQ(out[3], 10);
  EXPECT_EQ(out[4], 0) << "some thread saw a different barrier result";
}

TEST(EmuBasic, EarlyExitBeforeBarrierIsAnErrorNotAHang) {
  std::vector<float> out(64);
  float* po = out.data();
  const std::string error = launch(basic(), "early_exit_barrier", grid1d(4, 64), po);
  EXPECT_NE(error.find("deadlock"), std::string::npos) << error;
  EXPECT_NE(error.find("early_exit_barrier"), std::string::npos) << error;
  EXPECT_NE(error.find("16 wait at __syncthreads()"), std::string::npos) << error;
  EXPECT_NE(error.find("48 have exited"), std::string::npos) << error;
}

TEST(EmuBasic, ShuffleWithExitedLanesIsAnError) {
  std::vector<float> out(32);
  float* po = out.data();
  const std::string error = launch(basic(), "early_exit_shuffle", grid1d(1, 32), po);
  EXPECT_NE(error.find("exited"), std::string::npos) << error;
}

TEST(EmuBasic, DivergentWarpCollectivesAreAnError) {
  std::vector<float> out(32);
  float* po = out.data();
  const std::string error = launch(basic(), "divergent_collectives", grid1d(1, 32), po);
  EXPECT_NE(error.find("different warp collectives"), std::string::npos) << error;
}

TEST(EmuBasic, TrapStopsTheLaunch) {
  std::vector<float> out(4 * 32);
  float* po = out.data();
  const std::string error = launch(basic(), "trap_in_block_one", grid1d(4, 32), po);
  EXPECT_NE(error.find("block (1,0,0) thread (3,0,0): __trap()"), std::string::npos) << error;
}

TEST(EmuBasic, InvalidLaunchesAreRejected) {
  std::vector<float> out(2048);
  float* po = out.data();
  EXPECT_NE(launch(basic(), "trap_in_block_one", grid1d(0, 32), po), "");
  EXPECT_NE(launch(basic(), "trap_in_block_one", grid1d(1, 2048), po), "");
  EXPECT_NE(basic().launch("no_such_kernel", grid1d(1, 1), nullptr).find("no kernel"),
            std::string::npos);
}

TEST(EmuBasic, LaunchesAgainAfterAFailure) {
  // A failed launch abandons parked fibers; their stacks must come back for the next launch.
  for (int i = 0; i < 3; ++i) {
    std::vector<float> out(64);
    float* po = out.data();
    EXPECT_NE(launch(basic(), "early_exit_barrier", grid1d(2, 64), po), "");
    std::vector<int> votes(5, 0);
    int* pv = votes.data();
    EXPECT_EQ(launch(basic(), "barrier_votes", grid1d(2, 64), pv), "");
    EXPECT_EQ(votes[3], 10);
  }
}

}  // namespace
}  // namespace dg::emu::testing
