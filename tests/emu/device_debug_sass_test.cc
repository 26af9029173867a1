// Device debug mode's machine code on sm_90a (Note [Device debug mode] in
// codegen/device/dg_debug.cuh), without a GPU: off, the bounded wait is the bare try_wait loop,
// instruction for instruction, and the seed's kernels hold no trap and no printf; on, they trap,
// and the two builds never share a cache entry.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "runtime/binary_key.h"
#include "runtime/cached_binary.h"
#include "runtime/compiler.h"
#include "runtime/emu/device_headers.h"
#include "runtime/model/sass_tools.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/common/fixtures.h"
#include "tests/common/temp_dir.h"
#include "tests/emu/emu_test_util.h"

namespace dg {
namespace {

using emu::testing::ScopedEnv;

ScopedEnv debug_env(bool on) {
  return ScopedEnv({{std::string("DYNGEN_DEVICE_DEBUG"), std::string(on ? "1" : "0")}});
}

std::string cuobjdump_or_fail() {
  std::string why;
  std::string tool = find_cuobjdump(&why);
  if (tool.empty()) ADD_FAILURE() << why << "\nscripts/setup.sh installs cuobjdump and nvdisasm.";
  return tool;
}

// The device-side printf is a call to vprintf, absolute through a constant bank.
constexpr const char* kPrintfCall = "CALL.ABS.NOINC";

// `source` compiled for sm_90a with the runtime's device options (which read DYNGEN_DEVICE_DEBUG):
// the SASS of each function; `cubin` receives the binary.
std::map<std::string, std::string> sm90a_sass(const std::string& source, std::string* cubin) {
  const std::string tool = cuobjdump_or_fail();
  std::vector<CudaHeader> headers;
  for (const EmbeddedFile& f : device_headers())
    headers.push_back({std::string(f.name), std::string(f.content)});
  auto compiled = nvrtc_compile(source, headers, device_compile_options("sm_90a"));
  EXPECT_TRUE(compiled.ok()) << compiled.message();
  if (tool.empty() || !compiled.ok()) return {};
  *cubin = compiled->binary;
  std::string error;
  auto sass = sass_by_function(tool, compiled->binary, &error);
  EXPECT_FALSE(sass.empty()) << error;
  return sass;
}

// A function's instructions as printed, without addresses and encodings.
std::vector<std::string> instructions(const std::string& sass) {
  static const std::regex line(R"(/\*[0-9a-f]{4,}\*/\s+([^;]*);)");
  std::vector<std::string> out;
  for (std::sregex_iterator it(sass.begin(), sass.end(), line), end; it != end; ++it)
    out.push_back((*it)[1].str());
  return out;
}

bool any_function_has(const std::map<std::string, std::string>& sass, const std::string& what) {
  for (const auto& [name, text] : sass)
    if (text.find(what) != std::string::npos) return true;
  return false;
}

// One kernel waits through dg_mbarrier_wait_parity with a name, the other spins on try_wait itself,
// as the wait did before the debug mode existed.
constexpr const char* kTwoWaits = R"cuda(
#include "dg_device.cuh"
#include "dg_mbarrier_sm90.cuh"

extern "C" __global__ void helper_wait(unsigned parity, int* out) {
  __shared__ __align__(8) dg_u64 bar;
  if (threadIdx.x == 0) dg_mbarrier_init(&bar, blockDim.x);
  __syncthreads();
  dg_mbarrier_arrive(&bar);
  dg_mbarrier_wait_parity(&bar, parity, "named");
  out[threadIdx.x] = 1;
}

extern "C" __global__ void bare_wait(unsigned parity, int* out) {
  __shared__ __align__(8) dg_u64 bar;
  if (threadIdx.x == 0) dg_mbarrier_init(&bar, blockDim.x);
  __syncthreads();
  dg_mbarrier_arrive(&bar);
  while (!dg_mbarrier_try_wait_parity(&bar, parity)) {
  }
  out[threadIdx.x] = 1;
}
)cuda";

TEST(DeviceDebugSass, OffTheWaitIsTheBareLoopOnItTraps) {
  std::string cubin;
  {
    const ScopedEnv off = debug_env(false);
    auto sass = sm90a_sass(kTwoWaits, &cubin);
    ASSERT_TRUE(sass.count("helper_wait") && sass.count("bare_wait"));
    const std::vector<std::string> helper = instructions(sass["helper_wait"]);
    EXPECT_GT(helper.size(), 5u);
    EXPECT_EQ(helper, instructions(sass["bare_wait"]));
    EXPECT_FALSE(any_function_has(sass, "BPT.TRAP"));
    EXPECT_FALSE(any_function_has(sass, kPrintfCall));
    EXPECT_EQ(cubin.find("vprintf"), std::string::npos);
  }
  const ScopedEnv on = debug_env(true);
  auto sass = sm90a_sass(kTwoWaits, &cubin);
  ASSERT_TRUE(sass.count("helper_wait") && sass.count("bare_wait"));
  EXPECT_NE(instructions(sass["helper_wait"]), instructions(sass["bare_wait"]));
  EXPECT_NE(sass["helper_wait"].find("BPT.TRAP"), std::string::npos);
  EXPECT_NE(sass["helper_wait"].find(kPrintfCall), std::string::npos);
  EXPECT_NE(cubin.find("vprintf"), std::string::npos);
  // The debug wait suspends about a microsecond a poll (DG_DEVICE_DEBUG_SUSPEND_NS = 0x3e8).
  EXPECT_NE(sass["helper_wait"].find("NANOSLEEP.SYNCS 0x3e8"), std::string::npos);
  EXPECT_EQ(sass["bare_wait"].find("BPT.TRAP"), std::string::npos);
}

// The seed's forward graph for sm_90a through the runtime's compile path, with the mode off and
// on: two keys, and the trap only in the debug binary. (The wgmma kernels wait on mbarriers; every
// kernel reads dynamic shared memory's base through dg_dynamic_smem.)
TEST(DeviceDebugSass, SeedKernelsTrapOnlyInTheDebugBuild) {
  const std::string tool = cuobjdump_or_fail();
  ASSERT_FALSE(tool.empty());
  const Graph seed = testing::load_fixture("seed_expert_mlp.dgir");
  testing::TempDir dir;
  std::map<bool, std::string> keys;
  for (bool debug : {false, true}) {
    SCOPED_TRACE(debug ? "debug" : "normal");
    const ScopedEnv mode = debug_env(debug);
    CompileRequest req;
    req.target = "sm_90a";
    req.cache_dir = dir.path();
    CompileOutcome o = compile_graph(seed, req);
    ASSERT_TRUE(o.ok()) << o.error;
    keys[debug] = o.key;
    const KernelPlan& plan = o.executable->plan();
    auto cached = cached_device_binary(plan.source, "sm_90a", dir.path());
    ASSERT_TRUE(cached.ok()) << cached.message();
    EXPECT_EQ(cached->binary.find("dyngen device debug") != std::string::npos, debug);
    std::string error;
    auto sass = sass_by_function(tool, cached->binary, &error);
    ASSERT_FALSE(sass.empty()) << error;
    EXPECT_EQ(any_function_has(sass, "BPT.TRAP"), debug);
    EXPECT_EQ(any_function_has(sass, kPrintfCall), debug);
    EXPECT_EQ(cached->binary.find("vprintf") != std::string::npos, debug);
    int waiting_kernels = 0;
    for (const KernelLaunch& k : plan.kernels) {
      if (k.fallback) continue;  // in a binary of its own (Note [Fallbacks compiled on first need])
      ASSERT_TRUE(sass.count(k.name)) << k.name;
      if (k.tensor_maps.empty()) continue;  // no mbarrier waits
      ++waiting_kernels;
      EXPECT_NE(sass[k.name].find("SYNCS.PHASECHK"), std::string::npos) << k.name;
      EXPECT_EQ(sass[k.name].find("BPT.TRAP") != std::string::npos, debug) << k.name;
    }
    EXPECT_GT(waiting_kernels, 0) << "no sm_90a kernel with mbarrier waits in the seed";
  }
  EXPECT_NE(keys[false], keys[true]);
}

}  // namespace
}  // namespace dg
