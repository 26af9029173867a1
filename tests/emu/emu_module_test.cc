// EmuModule: compiling, reporting compiler errors, reloading saved bytes, the embedded headers,
// and the makecontext/swapcontext fallback of the fiber switch.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/emu/device_headers.h"
#include "tests/emu/basic_kernels.h"
#include "tests/emu/emu_test_util.h"

namespace dg::emu::testing {
namespace {

constexpr const char* kSmallKernels = R"cuda(
#include "dg_device.cuh"
extern "C" __global__ void scale(float* x, float factor, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}
DG_EMU_ENTRY(scale)

// A barrier and a shuffle per row: enough to drive every path of the fiber switch.
extern "C" __global__ void row_sum(const float* x, float* out, long long cols) {
  const float* row = x + (long long)blockIdx.x * cols;
  float v = 0.0f;
  for (long long j = threadIdx.x; j < cols; j += blockDim.x) v += row[j];
  const float total = dg_block_reduce_sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}
DG_EMU_ENTRY(row_sum)
)cuda";

// The small module is built with the makecontext/swapcontext fallback, which this covers too.
const std::vector<std::string> kUcontext = {"-Wall", "-Wextra", "-Werror",
                                            "-DDG_EMU_FORCE_UCONTEXT"};

TEST(EmuModule, CompileErrorReturnsTheCompilerLog) {
  const std::string source =
      "#include \"dg_device.cuh\"\n"
      "extern \"C\" __global__ void broken(float* x) { x[0] = undefined_symbol_xyz; }\n"
      "DG_EMU_ENTRY(broken)\n";
  Result<EmuModule> m = EmuModule::compile(source);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("undefined_symbol_xyz"), std::string::npos) << m.message();
  EXPECT_NE(m.message().find("error"), std::string::npos) << m.message();
}

TEST(EmuModule, MissingCompilerIsAnError) {
  EmuCompileOptions options;
  options.cxx = "/nonexistent/dyngen-cxx";
  Result<std::string> so = EmuModule::compile_to_shared_object(kSmallKernels, options);
  ASSERT_FALSE(so.ok());
  EXPECT_NE(so.message().find("host compile failed"), std::string::npos) << so.message();
}

TEST(EmuModule, SavedBytesLoadAgainAndRun) {
  const EmuModule& first = test_module(kSmallKernels, kUcontext);
  Result<EmuModule> again = EmuModule::load(first.so_bytes());
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_NE(again->find("scale"), nullptr);
  EXPECT_EQ(again->find("missing"), nullptr);
  std::vector<float> x = {1, 2, 3, 4, 5};
  float* px = x.data();
  float factor = 3.0f;
  long long n = 4;
  ASSERT_EQ(launch(again.value(), "scale", grid1d(2, 3), px, factor, n), "");
  EXPECT_EQ(x, (std::vector<float>{3, 6, 9, 12, 5}));
}

TEST(EmuModule, DistinctModulesStayDistinct) {
  // Loaded one after the other from memory: each must keep its own kernels (Note [Loading from
  // memory]), including when an earlier one has been unloaded.
  {
    Result<EmuModule> gone = EmuModule::load(test_module(kSmallKernels, kUcontext).so_bytes());
    ASSERT_TRUE(gone.ok()) << gone.message();
  }
  Result<EmuModule> small = EmuModule::load(test_module(kSmallKernels, kUcontext).so_bytes());
  Result<EmuModule> basic = EmuModule::load(test_module(kBasicKernels).so_bytes());
  ASSERT_TRUE(small.ok() && basic.ok());
  EXPECT_NE(small->find("scale"), nullptr);
  EXPECT_EQ(small->find("vadd"), nullptr);
  EXPECT_NE(basic->find("vadd"), nullptr);
  EXPECT_EQ(basic->find("scale"), nullptr);
}

// Note [Loading from memory]: the first module a process loads defines the engine's GNU-unique
// symbols for every later one, so glibc keeps it mapped after it is unloaded; its memfd's number
// must not come back as the next module's path. (Only a process whose first module this is shows
// it, as ctest runs each case.)
TEST(EmuModule, AnUnloadedModuleDoesNotShadowTheNext) {
  Result<std::string> basic = EmuModule::compile_to_shared_object(kBasicKernels);
  Result<std::string> small = EmuModule::compile_to_shared_object(kSmallKernels);
  ASSERT_TRUE(basic.ok() && small.ok()) << basic.message() << small.message();
  {
    Result<EmuModule> gone = EmuModule::load(basic.value());
    ASSERT_TRUE(gone.ok()) << gone.message();
    EXPECT_NE(gone->find("vadd"), nullptr);
  }
  Result<EmuModule> next = EmuModule::load(small.value());
  ASSERT_TRUE(next.ok()) << next.message();
  EXPECT_NE(next->find("scale"), nullptr);
  EXPECT_EQ(next->find("vadd"), nullptr);
}

TEST(EmuModule, GarbageBytesDoNotLoad) {
  Result<EmuModule> m = EmuModule::load("not a shared object");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("cannot load"), std::string::npos) << m.message();
}

TEST(EmuModule, UcontextFallbackRunsBarriersAndShuffles) {
  const EmuModule& m = test_module(kSmallKernels, kUcontext);
  const long long cols = 300;
  const unsigned rows = 5;
  std::vector<float> x(rows * cols), out(rows);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 11);
  const float* px = x.data();
  float* po = out.data();
  ASSERT_EQ(launch(m, "row_sum", grid1d(rows, 64), px, po, cols), "");
  for (unsigned r = 0; r < rows; ++r) {
    float ref = 0.0f;
    for (long long j = 0; j < cols; ++j) ref += x[r * cols + j];
    EXPECT_EQ(out[r], ref) << r;
  }
}

TEST(EmuModule, HeadersAreEmbedded) {
  auto has = [](const std::vector<EmbeddedFile>& files, std::string_view name) {
    for (const EmbeddedFile& f : files)
      if (f.name == name) return !f.content.empty();
    return false;
  };
  for (const char* name : {"dg_device.cuh", "dg_config.cuh", "dg_types.cuh", "dg_sync.cuh",
                           "dg_mma_sm80.cuh", "dg_cp_async_sm80.cuh"})
    EXPECT_TRUE(has(device_headers(), name)) << name;
  for (const char* name : {"dg_emu.h", "dg_emu_abi.h", "dg_emu_engine.h", "dg_emu_fiber.h",
                           "dg_mma_sm80_emu.h", "dg_wgmma_sm90_emu.h"})
    EXPECT_TRUE(has(emu_headers(), name)) << name;
}

TEST(EmuModule, CompilerIdentityNamesCompilerAndFlags) {
  const std::string id = EmuModule::compiler_identity();
  EXPECT_NE(id.find("-DDG_HOST_EMULATION"), std::string::npos) << id;
  EXPECT_NE(id.find('\n'), std::string::npos) << id;
}

}  // namespace
}  // namespace dg::emu::testing
