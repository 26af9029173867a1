// The GPU launch path (cuda_driver -> kernel_module -> executable) through the driver double,
// which checks each call as the driver would and runs the kernels' host emulation.
#include <gtest/gtest.h>

#include <cstdio>
#include <iostream>

#include "codegen/device/dg_tma_sm90.cuh"
#include "runtime/cuda_driver.h"
#include "runtime/disk_cache.h"
#include "runtime/host_run.h"
#include "tests/common/token_sweep.h"
#include "tests/driver_double/double_test_util.h"

namespace dg::driver_double {
namespace {

void expect_matches_reference(const Graph& g, const Executable& exe, int64_t s, int device,
                              std::vector<int> host_scalars = {}) {
  // The rank-r products split K (Note [Rank-r products]): Note [Tolerance at the tensor's scale].
  testing::expect_matches_reference_at(g, exe, g.symbols.at(0).symbol_name(), s, 40 + s,
                                       ToleranceMode::kTensorScale,
                                       HostRunOptions{device, std::move(host_scalars)});
}

// The double's cuTensorMapEncodeTiled applies the driver's documented rules and encodes the map
// the emulated TMA copy reads (Note [TMA box copies]).
TEST(DriverDouble, TensorMapEncodingChecksTheDocumentedRules) {
  const CudaDriver& d = CudaDriver::instance();
  ASSERT_TRUE(d.available()) << d.unavailable_reason();
  auto encode = d.api().cuTensorMapEncodeTiled;
  ASSERT_NE(encode, nullptr);
  alignas(16) static unsigned char data[64 * 80];
  alignas(64) DgTensorMap map{};
  const unsigned long long dims[2] = {40, 64}, strides[1] = {80};
  const unsigned box[2] = {16, 8}, ones[2] = {1, 1};
  constexpr int kBf16 = 9, kSwizzle32B = 1;  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, _SWIZZLE_32B
  EXPECT_EQ(encode(&map, kBf16, 2, data, dims, strides, box, ones, 0, kSwizzle32B, 0, 0), 0);
  EXPECT_EQ(map.words[0], kDgTensorMapMagic);
  EXPECT_EQ(map.words[3], 40u);
  EXPECT_EQ(map.words[5], 80u);
  const unsigned long long odd_stride[1] = {72};
  const unsigned big_box[2] = {16, 300};
  EXPECT_EQ(encode(&map, kBf16, 2, data + 8, dims, strides, box, ones, 0, 0, 0, 0), 1);
  EXPECT_EQ(encode(&map, kBf16, 2, data, dims, odd_stride, box, ones, 0, 0, 0, 0), 1);
  EXPECT_EQ(encode(&map, kBf16, 2, data, dims, strides, big_box, ones, 0, 0, 0, 0), 1);
  EXPECT_EQ(encode(reinterpret_cast<char*>(&map) + 16, kBf16, 2, data, dims, strides, box, ones, 0,
                   0, 0, 0),
            1);
  const std::string calls = the_double().calls();
  EXPECT_NE(calls.find("16-byte aligned"), std::string::npos) << calls;
  EXPECT_NE(calls.find("multiples of 16"), std::string::npos) << calls;
  EXPECT_NE(calls.find("boxDim"), std::string::npos) << calls;
  EXPECT_NE(calls.find("tensorMap must be 64-byte aligned"), std::string::npos) << calls;
  // What the emulation lacks is refused as not supported (CUDA_ERROR_NOT_SUPPORTED).
  EXPECT_EQ(encode(&map, kBf16, 2, data, dims, strides, box, ones, 1, 0, 0, 0), 801);
  EXPECT_EQ(encode(&map, kBf16, 3, data, dims, strides, box, ones, 0, 0, 0, 0), 801);
}

TEST(DriverDouble, IsTheDriverTheRuntimeOpened) {
  const CudaDriver& d = CudaDriver::instance();
  ASSERT_TRUE(d.available()) << d.unavailable_reason();
  EXPECT_EQ(d.device_count(), 2);
  EXPECT_EQ(d.default_arch(0), "sm_90a");
  EXPECT_LT(d.driver_version(), 13000);
  EXPECT_TRUE(arch_runs_on("sm_90", 90));
  EXPECT_TRUE(arch_runs_on("sm_90a", 90));
  EXPECT_TRUE(arch_runs_on("sm_80", 86));
  EXPECT_FALSE(arch_runs_on("sm_90a", 100));
  EXPECT_FALSE(arch_runs_on("sm_100", 90));
  EXPECT_TRUE(arch_runs_on("compute_80", 90));
}

TEST(DriverDouble, SeedForwardRunsThroughTheDriverAndMatchesTheReference) {
  Graph g = load_fixture("seed_expert_mlp.dgir");
  CompileOutcome o = compile_for_double(g);
  ASSERT_TRUE(o.ok()) << o.error;
  ASSERT_TRUE(o.executable->on_gpu());
  EXPECT_EQ(o.executable->target(), "sm_90a");
  // As under torch: device 0's primary context is current on this thread.
  ASSERT_TRUE(CudaDriver::instance().ensure_context(0).ok());
  the_double().clear_calls();
  expect_matches_reference(g, *o.executable, 37, 0);
  std::string calls = launch_calls(the_double().calls());
  std::cout << "driver calls for one seed forward (s=37):\n" << calls;
  EXPECT_NE(calls.find("cuLaunchKernel"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("refused"), std::string::npos) << calls;
  expect_matches_reference(g, *o.executable, 2, 0);
}

// The backward: driver_backward_test.cc.

const char* kScaled = R"(graph @scaled
sym s0 in [2, inf] div 1
input %x: f32[s0, 8]
input %scale: f32[]
%y: f32[s0, 8] = mul(%x, %scale)
output %y
)";

TEST(DriverDouble, HostScalarBesideGpuTensorsIsPassedByValue) {
  Graph g = parse_or_fail(kScaled);
  CompileOutcome o = compile_for_double(g);
  ASSERT_TRUE(o.ok()) << o.error;
  the_double().clear_calls();
  expect_matches_reference(g, *o.executable, 5, 0, /*host_scalars=*/{1});
  EXPECT_NE(std::string(the_double().calls()).find("cuMemcpyHtoDAsync bytes=4 ctx0"),
            std::string::npos)
      << the_double().calls();
  // A host tensor of rank 1 is not a scalar: a clear error, nothing launched.
  auto inputs = make_random_inputs(g, {{"s0", 5}}, 1);
  ASSERT_TRUE(inputs.ok());
  auto out = run_on_host(*o.executable, inputs.value(), HostRunOptions{0, {0}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.message().find("host memory"), std::string::npos) << out.message();
}

// A graph of its own: a module that no other test has loaded, so the streams it saw start empty.
const char* kShifted = R"(graph @shifted
sym s0 in [2, inf] div 1
input %x: f32[s0, 8]
input %shift: f32[]
%y: f32[s0, 8] = add(%x, %shift)
output %y
)";

// The calls before the first launch of `calls`: what a launch waited for.
std::string before_launch(const std::string& calls) {
  return calls.substr(0, calls.find("cuLaunchKernel"));
}

// Note [One stream at a time]: a launch on another stream than the module's last one on that
// device first waits for the last one; launches on one stream do not wait. (run_on_host itself
// synchronizes after its launch, to read the outputs: only the calls before the launch count.)
TEST(DriverDouble, SwitchingStreamsWaitsForThePreviousStream) {
  Graph g = parse_or_fail(kShifted);
  CompileOutcome o = compile_for_double(g);
  ASSERT_TRUE(o.ok()) << o.error;
  ASSERT_TRUE(CudaDriver::instance().ensure_context(0).ok());
  auto inputs = make_random_inputs(g, {{"s0", 6}}, 3);
  ASSERT_TRUE(inputs.ok());
  int a = 0, b = 0;  // two stream handles: the double records them, nothing dereferences them
  auto calls_of_run_on = [&](void* stream) {
    HostRunOptions opts{0, {1}};
    opts.stream = stream;
    the_double().clear_calls();
    auto out = run_on_host(*o.executable, inputs.value(), opts);
    EXPECT_TRUE(out.ok()) << out.message();
    return launch_calls(the_double().calls());
  };
  char a_name[32], b_name[32];
  std::snprintf(a_name, sizeof(a_name), "stream=%p", static_cast<void*>(&a));
  std::snprintf(b_name, sizeof(b_name), "stream=%p", static_cast<void*>(&b));
  calls_of_run_on(&a);
  std::string same = calls_of_run_on(&a);
  EXPECT_NE(same.find(std::string("ctx0 ") + a_name), std::string::npos) << same;
  EXPECT_EQ(before_launch(same).find("cuStreamSynchronize"), std::string::npos) << same;
  std::string switched = calls_of_run_on(&b);
  EXPECT_NE(before_launch(switched).find(std::string("cuStreamSynchronize ctx0 ") + a_name),
            std::string::npos)
      << switched;
  EXPECT_NE(switched.find(std::string("ctx0 ") + b_name), std::string::npos) << switched;
}

TEST(DriverDouble, TwoDevicesLoadTheModuleIntoEachContext) {
  Graph g = parse_or_fail(kScaled);
  CompileOutcome o = compile_for_double(g, "cuda:1");
  ASSERT_TRUE(o.ok()) << o.error;
  expect_matches_reference(g, *o.executable, 7, 0);
  expect_matches_reference(g, *o.executable, 9, 1);
  expect_matches_reference(g, *o.executable, 11, 0);
  std::string calls = launch_calls(the_double().calls());
  // One module per context, each loaded once: on first use there.
  EXPECT_NE(calls.find("cuModuleLoadDataEx options=4 ctx0"), std::string::npos) << calls;
  EXPECT_NE(calls.find("cuModuleLoadDataEx options=4 ctx1"), std::string::npos) << calls;
  EXPECT_NE(calls.find("params=4 ctx1"), std::string::npos) << calls;
  EXPECT_NE(calls.find("params=4 ctx0"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("refused"), std::string::npos) << calls;
  // Tensors on two devices in one call are refused before any launch.
  auto inputs = make_random_inputs(g, {{"s0", 3}}, 2);
  ASSERT_TRUE(inputs.ok());
  std::vector<dg_tensor> in(2), out(1);
  in[0] = {inputs.value()[0].bytes.data(), {3, 8},         2,
           static_cast<int>(DType::kF32),  DG_DEVICE_CUDA, 0};
  in[1] = {inputs.value()[1].bytes.data(), {}, 0, static_cast<int>(DType::kF32), DG_DEVICE_CUDA, 1};
  size_t ws = 0;
  Status s = o.executable->prepare(in.data(), 2, out.data(), 1, &ws);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("different devices"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace dg::driver_double
