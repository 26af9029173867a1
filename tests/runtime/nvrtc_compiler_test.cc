// NVRTC compiles without a GPU: cubins for named archs, PTX past the newest one, errors with the
// log, and a cache key that moves with everything that determines the binary.
#include "runtime/nvrtc_compiler.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace dg {
namespace {

constexpr const char* kKernel = R"(
#include "dg_scale.cuh"
extern "C" __global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = dg_scale(x[i]);
}
)";

std::vector<CudaHeader> headers() {
  return {{"dg_scale.cuh",
           "#pragma once\n__device__ inline float dg_scale(float v) { return 2.f * v; }\n"}};
}

bool is_elf(const std::string& b) {
  return b.size() > 4 && b.compare(0, 4,
                                   "\x7f"
                                   "ELF") == 0;
}

class NvrtcArchTest : public ::testing::TestWithParam<const char*> {};

TEST_P(NvrtcArchTest, CompilesCubinWithHeader) {
  CompileOptions opts;
  opts.arch = GetParam();
  Result<CompiledKernel> r = nvrtc_compile(kKernel, headers(), opts);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->kind, BinaryKind::kCubin);
  EXPECT_EQ(r->target, GetParam());
  ASSERT_FALSE(r->binary.empty());
  EXPECT_TRUE(is_elf(r->binary));
  EXPECT_EQ(detect_binary_kind(r->binary), BinaryKind::kCubin);
}

INSTANTIATE_TEST_SUITE_P(Archs, NvrtcArchTest, ::testing::Values("sm_80", "sm_90a"),
                         [](const auto& info) { return std::string(info.param); });

TEST(Nvrtc, SyntaxErrorReportsLog) {
  CompileOptions opts;
  opts.arch = "sm_80";
  Result<CompiledKernel> r =
      nvrtc_compile("extern \"C\" __global__ void k() { int x = ; }", {}, opts, "broken.cu");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("broken.cu"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("error"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("expected an expression"), std::string::npos) << r.message();
}

TEST(Nvrtc, MissingHeaderIsAnError) {
  Result<CompiledKernel> r = nvrtc_compile(kKernel, {}, CompileOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("dg_scale.cuh"), std::string::npos) << r.message();
}

TEST(Nvrtc, ArchNewerThanNvrtcFallsBackToPtx) {
  const std::vector<int> archs = nvrtc_supported_archs();
  ASSERT_FALSE(archs.empty());
  CompileOptions opts;
  opts.arch = "sm_" + std::to_string(archs.back() + 10) + "a";
  Result<CompiledKernel> r = nvrtc_compile(kKernel, headers(), opts);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->kind, BinaryKind::kPtx);
  EXPECT_EQ(r->target, "compute_" + std::to_string(archs.back()));
  ASSERT_FALSE(r->binary.empty());
  EXPECT_EQ(r->binary.back(), '\0');
  EXPECT_NE(r->binary.find(".entry scale"), std::string::npos);
  EXPECT_EQ(detect_binary_kind(r->binary), BinaryKind::kPtx);
}

TEST(Nvrtc, ComputeArchGivesPtx) {
  CompileOptions opts;
  opts.arch = "compute_90";
  Result<CompiledKernel> r = nvrtc_compile(kKernel, headers(), opts);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->kind, BinaryKind::kPtx);
  EXPECT_NE(r->binary.find(".target sm_90"), std::string::npos);
}

TEST(Nvrtc, RejectsBadArchs) {
  for (const char* arch : {"sm_20", "gfx90a", "sm_", "sm_90x", ""}) {
    CompileOptions opts;
    opts.arch = arch;
    Result<CompiledKernel> r = nvrtc_compile(kKernel, headers(), opts);
    EXPECT_FALSE(r.ok()) << arch;
    EXPECT_NE(r.message().find("arch"), std::string::npos) << r.message();
  }
}

TEST(Nvrtc, VersionAndSupportedArchs) {
  EXPECT_EQ(nvrtc_version().rfind("nvrtc-", 0), 0u) << nvrtc_version();
  const std::vector<int> archs = nvrtc_supported_archs();
  EXPECT_TRUE(std::is_sorted(archs.begin(), archs.end()));
  EXPECT_NE(std::find(archs.begin(), archs.end(), 80), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
}

TEST(Nvrtc, OptionsFollowFlags) {
  CompileOptions opts;
  opts.arch = "sm_90a";
  opts.fast_math = true;
  opts.line_info = true;
  opts.extra_options = {"-DDG_TILE=64"};
  Result<std::vector<std::string>> o = nvrtc_options(opts);
  ASSERT_TRUE(o.ok()) << o.message();
  const std::vector<std::string> want = {"-arch=sm_90a",      "--std=c++17",     "-default-device",
                                         "--split-compile=0", "--use_fast_math", "-lineinfo",
                                         "-DDG_TILE=64"};
  EXPECT_EQ(o.value(), want);
}

TEST(Nvrtc, CacheKeyCoversEverythingThatDeterminesTheBinary) {
  const CompileOptions base;
  const std::string k = compile_cache_key(kKernel, headers(), base);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, compile_cache_key(kKernel, headers(), base));

  std::vector<std::string> variants;
  variants.push_back(compile_cache_key(std::string(kKernel) + " ", headers(), base));
  std::vector<CudaHeader> h = headers();
  h[0].content += "\n";
  variants.push_back(compile_cache_key(kKernel, h, base));
  h = headers();
  h[0].name = "other.cuh";
  variants.push_back(compile_cache_key(kKernel, h, base));
  for (int i = 0; i < 4; ++i) {
    CompileOptions o = base;
    if (i == 0) o.arch = "sm_80";
    if (i == 1) o.fast_math = true;
    if (i == 2) o.line_info = true;
    if (i == 3) o.extra_options = {"-DX"};
    variants.push_back(compile_cache_key(kKernel, headers(), o));
  }
  for (const std::string& v : variants) EXPECT_NE(v, k);
  std::sort(variants.begin(), variants.end());
  EXPECT_EQ(std::unique(variants.begin(), variants.end()), variants.end());
}

}  // namespace
}  // namespace dg
