// Every device header, and every test kernel, compiles with NVRTC for sm_80 and sm_90a with the
// embedded headers: the GPU half of the one-interface, two-implementations device layer.
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <string>
#include <vector>

#include "runtime/emu/device_headers.h"
#include "tests/emu/basic_kernels.h"
#include "tests/emu/gemm_kernels.h"
#include "tests/emu/mbarrier_kernels.h"
#include "tests/emu/tensor_core_kernels.h"

namespace dg::emu::testing {
namespace {

// Compiles `source` to a cubin for `arch`; returns "" or the failure with NVRTC's log. With
// `ptxas_log`, compiles with -Xptxas -v and stores the log (registers, spills, shared memory).
std::string nvrtc_cubin(const std::string& source, const std::string& arch,
                        std::string* ptxas_log = nullptr) {
  std::vector<std::string> names, contents;
  for (const EmbeddedFile& f : device_headers()) {
    names.emplace_back(f.name);
    contents.emplace_back(f.content);
  }
  std::vector<const char*> name_ptrs, content_ptrs;
  for (size_t i = 0; i < names.size(); ++i) {
    name_ptrs.push_back(names[i].c_str());
    content_ptrs.push_back(contents[i].c_str());
  }
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, source.c_str(), "test.cu", static_cast<int>(names.size()),
                         content_ptrs.data(), name_ptrs.data()) != NVRTC_SUCCESS)
    return "nvrtcCreateProgram failed";
  const std::string arch_opt = "--gpu-architecture=" + arch;
  // -default-device as runtime/nvrtc_compiler.cc compiles: the device layer's generic lambdas
  // are device functions without an annotation.
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "-default-device", "-Xptxas", "-v"};
  const nvrtcResult rc = nvrtcCompileProgram(prog, ptxas_log ? 5 : 3, opts);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(prog, log.data());
  size_t cubin_size = 0;
  if (rc == NVRTC_SUCCESS) nvrtcGetCUBINSize(prog, &cubin_size);
  nvrtcDestroyProgram(&prog);
  if (ptxas_log != nullptr) *ptxas_log = log;
  if (rc != NVRTC_SUCCESS) return std::string(nvrtcGetErrorString(rc)) + "\n" + log;
  if (cubin_size == 0) return "no cubin\n" + log;
  return "";
}

class NvrtcDevice : public ::testing::TestWithParam<std::string> {};

TEST_P(NvrtcDevice, EachHeaderCompilesOnItsOwn) {
  for (const EmbeddedFile& f : device_headers()) {
    const std::string source =
        "#include \"" + std::string(f.name) +
        "\"\nextern \"C\" __global__ void probe(float* x) { x[0] = 1.0f; }\n";
    EXPECT_EQ(nvrtc_cubin(source, GetParam()), "") << f.name;
  }
}

TEST_P(NvrtcDevice, BasicKernelsCompile) { EXPECT_EQ(nvrtc_cubin(kBasicKernels, GetParam()), ""); }

TEST_P(NvrtcDevice, TensorCoreKernelsCompile) {
  EXPECT_EQ(nvrtc_cubin(kTensorCoreKernels, GetParam()), "");
}

// The GEMM template's test kernels compile without spills (ptxas reports "0 bytes spill stores"
// for each kernel).
TEST_P(NvrtcDevice, GemmKernelsCompileWithoutSpills) {
  std::string log;
  ASSERT_EQ(nvrtc_cubin(kGemmKernels, GetParam(), &log), "");
  size_t kernels = 0;
  for (size_t at = log.find("spill stores"); at != std::string::npos;
       at = log.find("spill stores", at + 1)) {
    ++kernels;
    const size_t line = log.rfind('\n', at);
    const std::string text = log.substr(line + 1, at - line - 1);
    EXPECT_NE(text.find(" 0 bytes stack frame, 0 bytes"), std::string::npos) << text;
  }
  EXPECT_GE(kernels, 6u) << log;
}

// The mbarrier kernels use sm_90's transaction counts and try_wait.
TEST(NvrtcDeviceSm90a, MbarrierKernelsCompile) {
  EXPECT_EQ(nvrtc_cubin(kMbarrierKernels, "sm_90a"), "");
}

INSTANTIATE_TEST_SUITE_P(Archs, NvrtcDevice, ::testing::Values("sm_80", "sm_90a"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dg::emu::testing
