// Note [Tensor maps]: the executable encodes each tensor map at every call and passes it by value
// between the pointers and the symbols; when a map is refused (an operand off 16 bytes) the call
// runs the GEMM's fallback kernels instead, counts it and logs the first one. A hand-built plan,
// without codegen, under host emulation and through the driver double's cuTensorMapEncodeTiled:
// the map kernel reports the map it received, the fallback kernel only that it ran.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ir/sha256.h"
#include "ir/text_format.h"
#include "runtime/compiler.h"
#include "runtime/emu/device_headers.h"
#include "runtime/emu/emu_module.h"
#include "runtime/executable.h"
#include "runtime/nvrtc_compiler.h"

namespace dg {
namespace {

// Before anything opens the driver: the double (tests/driver_double) as one sm_90 device.
const bool kDoubleEnvironment = [] {
  setenv("DYNGEN_CUDA_DRIVER", DG_DRIVER_DOUBLE, 1);
  setenv("DG_DOUBLE_CC", "90", 1);
  setenv("DYNGEN_SYNC", "1", 1);
  return true;
}();

// Only binding and shapes come from the graph; the plan below replaces its kernels.
constexpr const char* kGraph = R"(graph @tensor_map
sym n in [0, inf] div 1
input %x: bf16[n, 64]
%y: bf16[n, 64] = neg(%x)
output %y
)";

// Report slots in the output, read as long long.
enum Slot { kMapRan, kAddressOffset, kCols, kRows, kRowStride, kBox, kSymbol, kFallbackRan };

constexpr const char* kSource = R"(#include "dg_device.cuh"
#include "dg_tma_sm90.cuh"

extern "C" __global__ void with_map(const void* x, void* y, const __grid_constant__ DgTensorMap m,
                                    long long n) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  long long* out = static_cast<long long*>(y);
  out[0] = 1;
  out[1] = static_cast<long long>(m.words[1] - reinterpret_cast<unsigned long long>(x));
  out[2] = static_cast<long long>(m.words[3]);
  out[3] = static_cast<long long>(m.words[4]);
  out[4] = static_cast<long long>(m.words[5]);
  out[5] = static_cast<long long>(m.words[6]);
  out[6] = n;
}
DG_EMU_ENTRY(with_map)

extern "C" __global__ void fallback(const void* x, void* y, long long n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) static_cast<long long*>(y)[7] = 1;
}
DG_EMU_ENTRY(fallback)
)";

// The map covers rows 1.. of x: offset one row, n - 1 rows of 64 bf16 (128 bytes apart).
KernelPlan make_plan(const SymExpr& n, bool with_fallback) {
  KernelPlan plan;
  plan.symbols = {n};
  plan.source = kSource;
  const std::vector<BufferRef> buffers = {{BufferRef::kInput, 0}, {BufferRef::kOutput, 0}};
  KernelLaunch with_map;
  with_map.name = "with_map";
  with_map.buffers = buffers;
  with_map.tensor_maps = {{0, SymExpr(128), n - 1, SymExpr(64), SymExpr(128), 8, 64}};
  with_map.grid = {n, SymExpr(1), SymExpr(1)};  // empty, and encoding nothing, at n = 0
  KernelLaunch fallback;
  fallback.name = "fallback";
  fallback.buffers = buffers;
  fallback.fallback = true;
  fallback.variant = 1;
  fallback.grid = {n, SymExpr(1), SymExpr(1)};
  plan.kernels = {with_map};
  if (with_fallback) plan.kernels.push_back(fallback);
  return plan;
}

// The host module, named after its source's sha256 as compile_graph names it, so that the double
// finds it when it runs that source's PTX (Note [How the double runs a kernel]).
Result<std::unique_ptr<KernelModule>> host_module(const std::string& source) {
  auto so = emu::EmuModule::compile_to_shared_object(
      source + "\nextern \"C\" __attribute__((visibility(\"default\"))) const char " +
      "dg_emu_source_sha256[] = \"" + sha256_hex(source) + "\";\n");
  if (!so.ok()) return so.status();
  return load_host_module(so.value());
}

// PTX for the double, its .file named after the source's sha256.
Result<std::unique_ptr<KernelModule>> gpu_module(const std::string& source) {
  std::vector<CudaHeader> headers;
  for (const EmbeddedFile& f : device_headers())
    headers.push_back({std::string(f.name), std::string(f.content)});
  CompileOptions options;
  options.arch = "compute_90";
  options.line_info = true;
  auto ptx = nvrtc_compile(source, headers, options, "dyngen_" + sha256_hex(source) + ".cu");
  if (!ptx.ok()) return ptx.status();
  return load_cuda_module(ptx->binary, 0);
}

// The hand-built executable on the host, or (gpu) on the double's device 0.
std::shared_ptr<Executable> build_executable(bool gpu = false, bool with_fallback = true) {
  ParseResult parsed = parse_graph_text(kGraph);
  EXPECT_TRUE(parsed.ok()) << parsed.error;
  KernelPlan plan = make_plan(parsed.graph.symbols.at(0), with_fallback);
  auto host = host_module(plan.source);
  EXPECT_TRUE(host.ok()) << host.message();
  if (!host.ok()) return nullptr;
  if (gpu) {
    static std::unique_ptr<KernelModule> emulation;  // loaded for the double to find
    emulation = std::move(host).value();
    host = gpu_module(plan.source);
    EXPECT_TRUE(host.ok()) << host.message();
    if (!host.ok()) return nullptr;
  }
  auto exe = Executable::create(parsed.graph, std::move(plan), std::move(host).value(),
                                gpu ? "sm_90" : "host");
  EXPECT_TRUE(exe.ok()) << exe.message();
  return exe.ok() ? exe.value() : nullptr;
}

dg_tensor tensor(void* data, int64_t n, bool gpu) {
  dg_tensor t{};
  t.data = data;
  t.rank = 2;
  t.shape[0] = n;
  t.shape[1] = 64;
  t.dtype = static_cast<int32_t>(DType::kBF16);
  t.device_type = gpu ? DG_DEVICE_CUDA : DG_DEVICE_HOST;
  return t;
}

// Runs `exe` with x at `shift` bytes past a 64-byte boundary; returns the output's report slots.
// (The double's device memory is host memory.)
std::vector<long long> run(const Executable& exe, int64_t n, size_t shift) {
  const size_t bytes = static_cast<size_t>(n) * 64 * 2;
  std::unique_ptr<char, decltype(&std::free)> x(
      static_cast<char*>(std::aligned_alloc(64, (bytes + shift + 63) / 64 * 64 + 64)), &std::free);
  std::vector<long long> y(bytes / sizeof(long long) + 8, 0);
  const bool gpu = exe.on_gpu();
  dg_tensor in = tensor(x.get() + shift, n, gpu), out = tensor(y.data(), n, gpu);
  Status s = exe.launch(&in, 1, &out, 1, nullptr, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  y.resize(kFallbackRan + 1);
  return y;
}

int64_t tma_fallbacks() { return runtime_stats().tma_fallback_launches; }

TEST(TensorMapLaunch, AlignedOperandRunsTheMapKernelWithItsMap) {
  auto exe = build_executable();
  ASSERT_NE(exe, nullptr);
  const int64_t before = tma_fallbacks();
  std::vector<long long> report = run(*exe, 16, 0);
  EXPECT_EQ(report[kMapRan], 1);
  EXPECT_EQ(report[kFallbackRan], 0);
  EXPECT_EQ(report[kAddressOffset], 128);
  EXPECT_EQ(report[kCols], 64);
  EXPECT_EQ(report[kRows], 15);
  EXPECT_EQ(report[kRowStride], 128);
  EXPECT_EQ(report[kBox], 64 | (8LL << 32));
  EXPECT_EQ(report[kSymbol], 16);  // the symbols follow the map
  EXPECT_EQ(tma_fallbacks(), before);
}

TEST(TensorMapLaunch, RefusedMapRunsTheFallbackCountedAndLoggedOnce) {
  auto exe = build_executable();
  ASSERT_NE(exe, nullptr);
  const int64_t before = tma_fallbacks();
  testing::internal::CaptureStderr();
  std::vector<long long> first = run(*exe, 16, 2);
  std::vector<long long> second = run(*exe, 16, 2);
  const std::string log = testing::internal::GetCapturedStderr();
  for (const std::vector<long long>& report : {first, second}) {
    EXPECT_EQ(report[kMapRan], 0);
    EXPECT_EQ(report[kFallbackRan], 1);
  }
  EXPECT_EQ(tma_fallbacks(), before + 2);
  size_t lines = 0;
  for (char c : log) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << log;
  EXPECT_NE(log.find("kernel with_map"), std::string::npos) << log;
  EXPECT_NE(log.find("input 0"), std::string::npos) << log;
  EXPECT_NE(log.find("16-byte aligned"), std::string::npos) << log;
  EXPECT_NE(log.find("mma.sync"), std::string::npos) << log;
  // Aligned again: the map kernel, nothing counted.
  std::vector<long long> aligned = run(*exe, 16, 0);
  EXPECT_EQ(aligned[kMapRan], 1);
  EXPECT_EQ(aligned[kFallbackRan], 0);
  EXPECT_EQ(tma_fallbacks(), before + 2);
}

// Note [GEMM fallbacks]: a kernel that cannot run hands its call to the fallback; a plan without
// one (which codegen never makes) is an error, not a call that silently skips the GEMM.
TEST(TensorMapLaunch, RefusedMapWithoutAFallbackIsAnError) {
  auto exe = build_executable(/*gpu=*/false, /*with_fallback=*/false);
  ASSERT_NE(exe, nullptr);
  const size_t bytes = 16 * 64 * 2;
  std::vector<char> x(bytes + 64);
  std::vector<long long> y(bytes / sizeof(long long) + 8, 0);
  char* shifted = x.data() + (64 - reinterpret_cast<uintptr_t>(x.data()) % 64) % 64 + 2;
  dg_tensor in = tensor(shifted, 16, false), out = tensor(y.data(), 16, false);
  testing::internal::CaptureStderr();
  Status s = exe->launch(&in, 1, &out, 1, nullptr, nullptr);
  testing::internal::GetCapturedStderr();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("with_map could not run in this call and its GEMM has no fallback"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(y[kMapRan], 0);
}

// Note [Fallbacks compiled on first need]: with a builder, the fallback is not looked up in the
// first module but in the builder's, built by the first call that needs it and only then.
std::shared_ptr<Executable> build_lazy_executable(FallbackBuilder builder) {
  ParseResult parsed = parse_graph_text(kGraph);
  EXPECT_TRUE(parsed.ok()) << parsed.error;
  KernelPlan plan = make_plan(parsed.graph.symbols.at(0), /*with_fallback=*/true);
  auto first = host_module(plan.source);
  EXPECT_TRUE(first.ok()) << first.message();
  if (!first.ok()) return nullptr;
  auto exe = Executable::create(parsed.graph, std::move(plan), std::move(first).value(), "host",
                                std::move(builder));
  EXPECT_TRUE(exe.ok()) << exe.message();
  return exe.ok() ? exe.value() : nullptr;
}

TEST(TensorMapLaunch, FallbackModuleIsBuiltByTheFirstCallThatNeedsIt) {
  int builds = 0;
  auto exe = build_lazy_executable([&builds] {
    ++builds;
    return host_module(kSource);
  });
  ASSERT_NE(exe, nullptr);
  std::vector<long long> report = run(*exe, 16, 0);
  EXPECT_EQ(report[kMapRan], 1);
  EXPECT_EQ(builds, 0) << "an aligned call needs no fallback";
  testing::internal::CaptureStderr();
  report = run(*exe, 16, 2);
  EXPECT_EQ(report[kFallbackRan], 1);
  EXPECT_EQ(report[kMapRan], 0);
  report = run(*exe, 16, 2);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(report[kFallbackRan], 1);
  EXPECT_EQ(builds, 1);
}

// A fallback that does not compile fails the call that needs it, with the compiler's message,
// every time (built once), and runs nothing in its place.
TEST(TensorMapLaunch, FallbackThatDoesNotCompileFailsTheCall) {
  int builds = 0;
  auto exe = build_lazy_executable([&builds]() -> Result<std::unique_ptr<KernelModule>> {
    ++builds;
    return Status::error("ptxas says no");
  });
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(run(*exe, 16, 0)[kMapRan], 1);
  const size_t bytes = 16 * 64 * 2;
  std::vector<char> x(bytes + 64);
  char* shifted = x.data() + (64 - reinterpret_cast<uintptr_t>(x.data()) % 64) % 64 + 2;
  for (int call = 0; call < 2; ++call) {
    std::vector<long long> y(bytes / sizeof(long long) + 8, 0);
    dg_tensor in = tensor(shifted, 16, false), out = tensor(y.data(), 16, false);
    testing::internal::CaptureStderr();
    Status s = exe->launch(&in, 1, &out, 1, nullptr, nullptr);
    testing::internal::GetCapturedStderr();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.message(), "fallback: the fallback kernels did not compile: ptxas says no");
    EXPECT_EQ(y[kMapRan], 0);
    EXPECT_EQ(y[kFallbackRan], 0);
  }
  EXPECT_EQ(builds, 1);
}

// An empty grid encodes nothing (its map would be refused: zero rows) and runs nothing.
TEST(TensorMapLaunch, EmptyGridEncodesNothing) {
  auto exe = build_executable();
  ASSERT_NE(exe, nullptr);
  const int64_t before = tma_fallbacks();
  LaunchBatch batch;
  char x[64];
  dg_tensor in = tensor(x, 0, false), out = tensor(x, 0, false);
  ASSERT_TRUE(exe->pack(&in, 1, &out, 1, nullptr, &batch).ok());
  EXPECT_EQ(batch.tma_ok, std::vector<char>({1, 1}));
  // Two kernels: two pointers each, one map, one symbol.
  ASSERT_EQ(batch.args.size(), 7u);
  EXPECT_EQ(batch.args[2], static_cast<void*>(&batch.tensor_maps[0]));
  EXPECT_EQ(batch.args[3], static_cast<void*>(&batch.symbol_values[0]));
  EXPECT_TRUE(exe->launch(&in, 1, &out, 1, nullptr, nullptr).ok());
  EXPECT_EQ(tma_fallbacks(), before);
}

// The GPU module encodes through the driver table (the double applies the driver's rules and
// encodes the emulation's map), and the same launch order reaches the kernels.
TEST(TensorMapLaunch, GpuModuleEncodesThroughTheDriver) {
  ASSERT_TRUE(kDoubleEnvironment);
  auto exe = build_executable(/*gpu=*/true);
  ASSERT_NE(exe, nullptr);
  ASSERT_TRUE(exe->on_gpu());
  const int64_t before = tma_fallbacks();
  std::vector<long long> report = run(*exe, 16, 0);
  EXPECT_EQ(report[kMapRan], 1);
  EXPECT_EQ(report[kFallbackRan], 0);
  EXPECT_EQ(report[kAddressOffset], 128);
  EXPECT_EQ(report[kRows], 15);
  EXPECT_EQ(report[kSymbol], 16);
  testing::internal::CaptureStderr();
  report = run(*exe, 16, 2);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(report[kMapRan], 0);
  EXPECT_EQ(report[kFallbackRan], 1);
  EXPECT_EQ(tma_fallbacks(), before + 1);
  EXPECT_NE(log.find("cuTensorMapEncodeTiled failed"), std::string::npos) << log;
  EXPECT_NE(log.find("16-byte aligned"), std::string::npos) << log;
}

}  // namespace
}  // namespace dg
