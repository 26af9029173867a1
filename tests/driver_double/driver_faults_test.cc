// Launch limits and faults through the driver double: grids for any M, a sticky fault that leaves
// the cache entry on disk, DYNGEN_SYNC naming the faulting kernel, refused images.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/cache_entry.h"
#include "runtime/cuda_driver.h"
#include "runtime/disk_cache.h"
#include "runtime/host_run.h"
#include "tests/driver_double/double_test_util.h"

namespace dg::driver_double {
namespace {

// A linear whose token count M is unbounded: its M tiles must go on gridDim.x.
const char* kLinear = R"(graph @tall_linear
sym s0 in [2, inf] div 1
input %x: f32[s0, 32]
input %w: f32[16, 32]
%y: f32[s0, 16] = linear(%x, %w)
output %y
)";

// Launches `exe` with the given rows and fake device pointers (the double checks and records
// the launch without executing it).
Status launch_rows(const Executable& exe, int64_t rows) {
  char* fake = reinterpret_cast<char*>(0x10000);
  dg_tensor in[2] = {{fake, {rows, 32}, 2, static_cast<int>(DType::kF32), DG_DEVICE_CUDA, 0},
                     {fake, {16, 32}, 2, static_cast<int>(DType::kF32), DG_DEVICE_CUDA, 0}};
  dg_tensor out[1] = {{fake, {rows, 16}, 2, static_cast<int>(DType::kF32), DG_DEVICE_CUDA, 0}};
  return exe.launch(in, 2, out, 1, nullptr, nullptr);
}

TEST(DriverFaults, GridForMAboveTheOldYLimitIsWithinEveryLimit) {
  Graph g = parse_or_fail(kLinear);
  CompileOutcome o = compile_graph(g, double_request("cuda"));
  ASSERT_TRUE(o.ok()) << o.error;
  the_double().set_execute(0);
  the_double().clear_calls();
  const int64_t rows = 4194240 + 64 * 3;  // 65,538 tiles of 64 rows; gridDim.y stops at 65,535
  Status s = launch_rows(*o.executable, rows);
  the_double().set_execute(1);
  std::string calls = launch_calls(the_double().calls());
  ASSERT_TRUE(s.ok()) << s.message() << "\n" << calls;
  EXPECT_NE(calls.find("grid=65538,1,1"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("refused"), std::string::npos) << calls;
}

TEST(DriverFaults, StickyFaultLeavesTheCacheEntryOnDisk) {
  // A graph of its own, so that this process compiles it here (not from the memory cache).
  Graph g = parse_or_fail(R"(graph @sticky
sym s0 in [2, inf] div 1
input %x: f32[s0, 4]
%y: f32[s0, 4] = exp(%x)
output %y
)");
  Graph warm = parse_or_fail(kLinear);
  CompileOutcome w = compile_graph(warm, double_request("cuda"));
  ASSERT_TRUE(w.ok()) << w.error;
  // A faulting launch makes device 0's context sticky: every later call there fails.
  the_double().set_execute(0);
  the_double().inject_fault(0, /*at_sync=*/0);
  Status s = launch_rows(*w.executable, 64);
  the_double().set_execute(1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << s.message();

  RuntimeStats before = runtime_stats();
  CompileOutcome failed = compile_graph(g, double_request("cuda"));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << failed.error;
  // Not the image's fault: no second compile, and the entry stays.
  EXPECT_LE(runtime_stats().nvrtc_compiles - before.nvrtc_compiles, 1);

  the_double().clear_faults();
  before = runtime_stats();
  CompileOutcome again = compile_graph(g, double_request("cuda"));
  ASSERT_TRUE(again.ok()) << again.error;
  EXPECT_NE(again.cache_hit, CacheHit::kMiss);
  EXPECT_EQ(runtime_stats().nvrtc_compiles, before.nvrtc_compiles);
  // The entry is still on disk and verifies (Note [Kernel cache key]: the reported key is the
  // entry's file stem).
  std::ifstream in(std::filesystem::path(DG_DOUBLE_CACHE_DIR) / (again.key + ".dgk"),
                   std::ios::binary);
  ASSERT_TRUE(in.good()) << "no cache entry " << again.key;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(decode_cache_entry(bytes, nullptr).check, EntryCheck::kValid);
}

TEST(DriverFaults, SyncNamesTheKernelThatFaulted) {
  // DYNGEN_SYNC=1 in this binary (double_test_util.cc): a fault seen at synchronization is
  // reported under the kernel that was launched.
  Graph g = parse_or_fail(kLinear);
  CompileOutcome o = compile_for_double(g, "cuda:1");
  ASSERT_TRUE(o.ok()) << o.error;
  the_double().inject_fault(1, /*at_sync=*/1);
  auto inputs = make_random_inputs(g, {{"s0", 3}}, 5);
  ASSERT_TRUE(inputs.ok());
  auto out = run_on_host(*o.executable, inputs.value(), HostRunOptions{1, {}});
  the_double().clear_faults();
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.message().find("k0_linear"), std::string::npos) << out.message();
  EXPECT_NE(out.message().find("DYNGEN_SYNC"), std::string::npos) << out.message();
  EXPECT_NE(out.message().find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << out.message();
}

TEST(DriverFaults, HostTensorsOnAGpuExecutableAreAClearError) {
  Graph g = parse_or_fail(kLinear);
  CompileOutcome o = compile_graph(g, double_request("cuda"));
  ASSERT_TRUE(o.ok()) << o.error;
  float x[3 * 32] = {}, w[16 * 32] = {};
  dg_tensor in[2] = {{x, {3, 32}, 2, static_cast<int>(DType::kF32), DG_DEVICE_HOST, 0},
                     {w, {16, 32}, 2, static_cast<int>(DType::kF32), DG_DEVICE_HOST, 0}};
  dg_tensor out[1] = {};
  size_t ws = 0;
  Status s = o.executable->prepare(in, 2, out, 1, &ws);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("input 0 is in host memory"), std::string::npos) << s.message();
  CompileOutcome bad = compile_graph(g, double_request("cuda:7"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error.find("2 CUDA devices"), std::string::npos) << bad.error;
}

}  // namespace
}  // namespace dg::driver_double
