// Device debug mode through the GPU launch path (Note [Device debug mode] in
// codegen/device/dg_debug.cuh). The double cannot run PTX: it runs the host emulation of the same
// source (Note [How the double runs a kernel]). So what it can show is that DYNGEN_DEVICE_DEBUG=1
// puts the debug macro into the PTX the driver loads (a trap and a printf in it), names that PTX
// apart from the normal build's, and that the launch of a hanging kernel comes back as a failed
// launch with the trap's message, from the debug build of the emulation the double picks for it.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "runtime/binary_key.h"
#include "runtime/cuda_driver.h"
#include "runtime/emu/device_headers.h"
#include "runtime/emu/emu_module.h"
#include "runtime/kernel_module.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/common/token_sweep.h"
#include "tests/driver_double/double_test_util.h"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/wait_mutants.h"

namespace dg::driver_double {
namespace {

using emu::testing::ScopedEnv;

ScopedEnv debug_env(bool on) {
  return ScopedEnv({{std::string("DYNGEN_DEVICE_DEBUG"), std::string(on ? "1" : "0")}});
}

// One source built as compile_graph builds it for the double's device (Note [PTX when the driver
// is older]): PTX named after the key's source name, and the host emulation the double runs,
// tagged with the same name; both with the runtime's options of the current mode.
struct Built {
  BinaryKey key;
  std::string ptx;
  std::unique_ptr<KernelModule> gpu, host;
};

Built build(const std::string& source) {
  Built b;
  auto key = binary_key(source, ResolvedTarget{"sm_90a", true, 0});
  EXPECT_TRUE(key.ok()) << key.message();
  if (!key.ok()) return b;
  b.key = key.value();
  EXPECT_EQ(b.key.arch, "compute_90a");
  auto so = emu::EmuModule::compile_to_shared_object(
      source + "\nextern \"C\" __attribute__((visibility(\"default\"))) const char " +
          "dg_emu_source_sha256[] = \"" + b.key.source_name + "\";\n",
      host_compile_options());
  EXPECT_TRUE(so.ok()) << so.message();
  if (!so.ok()) return b;
  auto host = load_host_module(so.value());
  EXPECT_TRUE(host.ok()) << host.message();
  std::vector<CudaHeader> headers;
  for (const EmbeddedFile& f : device_headers())
    headers.push_back({std::string(f.name), std::string(f.content)});
  auto ptx = nvrtc_compile(source, headers, device_compile_options(b.key.arch),
                           "dyngen_" + b.key.source_name + ".cu");
  EXPECT_TRUE(ptx.ok()) << ptx.message();
  if (!host.ok() || !ptx.ok()) return b;
  b.host = std::move(host).value();
  b.ptx = ptx->binary;
  auto gpu = load_cuda_module(b.ptx, 0);
  EXPECT_TRUE(gpu.ok()) << gpu.message();
  if (gpu.ok()) b.gpu = std::move(gpu).value();
  return b;
}

// wgmma_gemm_128x64x3 on the double's device 0 over 64 x 128 x 200 (device memory is host
// memory): the launch's status.
Status launch_gemm(const KernelModule& gpu) {
  constexpr long long M = 64, N = 128, K = 200;
  std::vector<dg_bf16> a = emu::testing::random_bf16(M * K, 1),
                       b = emu::testing::random_bf16(N * K, 2);
  std::vector<float> c(M * N, 0.0f);
  TensorMapBytes am, bm;
  Status s = gpu.encode_tensor_map(&am, a.data(), M, K, 2 * K, 128, 64);
  if (!s.ok()) return s;
  s = gpu.encode_tensor_map(&bm, b.data(), N, K, 2 * K, 64, 64);
  if (!s.ok()) return s;
  float* pc = c.data();
  long long m = M, n = N, k = K;
  void* args[] = {&am, &bm, &pc, &m, &n, &k};
  constexpr int kThreads = 384,
                kSmem = 3 * emu::testing::kGemmStageBytes + 7 * 8;  // DgWgmmaTile::kSmemBytes
  return gpu.launch(0, 0, {1, 2, 1}, {kThreads, 1, 1}, kSmem, args, nullptr);
}

TEST(DriverDeviceDebug, WrongParityHangIsATrapInTheDebugBuild) {
  const std::string source =
      emu::testing::wgmma_gemm_with_producer_parity(emu::testing::kWrongProducerParity);
  ASSERT_FALSE(source.empty()) << "the producer's parity is not in dg_gemm_sm90.cuh once";
  ASSERT_TRUE(CudaDriver::instance().ensure_context(0).ok());
  // The normal build first, so that its emulation is loaded when the debug PTX is launched: the
  // double must pick the debug one by the name in the PTX.
  Built normal, debug;
  {
    const ScopedEnv off = debug_env(false);
    normal = build(source);
  }
  {
    const ScopedEnv on = debug_env(true);
    debug = build(source);
  }
  ASSERT_TRUE(normal.gpu && debug.gpu);
  EXPECT_NE(normal.key.stored, debug.key.stored);
  EXPECT_EQ(normal.key.source_name, normal.key.source_sha);
  EXPECT_EQ(debug.key.source_name, debug.key.source_sha + "-debug");
  EXPECT_EQ(normal.ptx.find("trap;"), std::string::npos);
  EXPECT_EQ(normal.ptx.find("vprintf"), std::string::npos);
  EXPECT_NE(debug.ptx.find("trap;"), std::string::npos);
  EXPECT_NE(debug.ptx.find("vprintf"), std::string::npos);
  EXPECT_NE(debug.ptx.find("dyngen_" + debug.key.source_name + ".cu"), std::string::npos);

  for (Built* b : {&normal, &debug}) ASSERT_TRUE(b->gpu->resolve({"wgmma_gemm_128x64x3"}).ok());
  const Status hang = launch_gemm(*normal.gpu);
  ASSERT_FALSE(hang.ok());
  EXPECT_NE(hang.message().find("never completes"), std::string::npos) << hang.message();
  EXPECT_EQ(hang.message().find("device debug"), std::string::npos) << hang.message();
  const Status trap = launch_gemm(*debug.gpu);
  ASSERT_FALSE(trap.ok());
  for (const char* part : {"CUDA_ERROR_LAUNCH_FAILED",
                           "wgmma_gemm_128x64x3: dyngen device debug: "
                           "mbarrier wait '",
                           "parity 0) not complete after", "block (0,", ": trap"})
    EXPECT_NE(trap.message().find(part), std::string::npos) << part << "\n" << trap.message();
}

// A correct graph runs in the debug build through the whole path (compile_graph, the cache, the
// double) and gives the reference's results: no wait reaches its bound, dynamic shared memory is
// aligned. Its binary has a key of its own.
TEST(DriverDeviceDebug, SeedForwardRunsInTheDebugBuild) {
  const Graph g = load_fixture("seed_expert_mlp.dgir");
  const ScopedEnv on = debug_env(true);
  CompileOutcome o = compile_for_double(g);
  ASSERT_TRUE(o.ok()) << o.error;
  ASSERT_TRUE(o.executable->on_gpu());
  std::string normal_key;
  {
    const ScopedEnv off = debug_env(false);
    auto key = binary_key(o.executable->plan().source, ResolvedTarget{"sm_90a", true, 0});
    ASSERT_TRUE(key.ok()) << key.message();
    normal_key = key->file;
  }
  EXPECT_NE(o.key, normal_key);
  ASSERT_TRUE(CudaDriver::instance().ensure_context(0).ok());
  testing::expect_matches_reference_at(g, *o.executable, g.symbols.at(0).symbol_name(), 37, 77,
                                       ToleranceMode::kTensorScale, HostRunOptions{0, {}});
}

}  // namespace
}  // namespace dg::driver_double
