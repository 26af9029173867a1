// The wgmma primitive's machine code (codegen/device/dg_wgmma_sm90.cuh): the wgmma test kernels
// (tests/emu/wgmma_kernels.h), compiled by NVRTC for sm_90a as every device compile is, issue
// HGMMA.64xNx16.F32.BF16 with the N they ask for (16 to 256), spill nothing, and issue a
// warpgroup fence (WARPGROUP.ARRIVE) before their MMAs; no GPU needed.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/compiler.h"
#include "runtime/emu/device_headers.h"
#include "runtime/model/sass_stats.h"
#include "runtime/model/sass_tools.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/ptxas_report.h"
#include "tests/emu/tma_kernels.h"
#include "tests/emu/wgmma_gemm_kernels.h"
#include "tests/emu/wgmma_kernels.h"

namespace dg {
namespace {

// `source` compiled for sm_90a as every device compile is, with no kernel spilling; its SASS by
// kernel (empty after a failed expectation).
std::map<std::string, std::string> sm90a_sass(const std::string& source) {
  std::string why;
  const std::string tool = find_cuobjdump(&why);
  EXPECT_FALSE(tool.empty()) << why << "\nscripts/setup.sh installs cuobjdump and nvdisasm.";
  std::vector<CudaHeader> headers;
  for (const EmbeddedFile& f : device_headers())
    headers.push_back({std::string(f.name), std::string(f.content)});
  auto compiled = nvrtc_compile(source, headers, device_compile_options("sm_90a"));
  EXPECT_TRUE(compiled.ok()) << compiled.message();
  if (tool.empty() || !compiled.ok()) return {};
  for (const KernelResources& r : parse_ptxas_log(compiled->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.name;
    EXPECT_EQ(r.spill_load_bytes, 0) << r.name;
  }
  std::string error;
  auto sass = sass_by_function(tool, compiled->binary, &error);
  EXPECT_FALSE(sass.empty()) << error;
  return sass;
}

TEST(WgmmaSass, KernelsIssueHgmmaOnSm90a) {
  auto sass = sm90a_sass(emu::testing::wgmma_kernels());
  ASSERT_FALSE(sass.empty());
  const std::pair<const char*, const char*> expected[] = {
      {"wgmma_n16", "HGMMA.64x16x16.F32.BF16"},
      {"wgmma_n32", "HGMMA.64x32x16.F32.BF16"},
      {"wgmma_n64", "HGMMA.64x64x16.F32.BF16"},
      {"wgmma_n128", "HGMMA.64x128x16.F32.BF16"},
      {"wgmma_n256", "HGMMA.64x256x16.F32.BF16"},
      {"wgmma_steps_n16", "HGMMA.64x16x16.F32.BF16"},
      {"wgmma_two_groups", "HGMMA.64x16x16.F32.BF16"},
      {"wgmma_read_early", "HGMMA.64x16x16.F32.BF16"},
  };
  for (const auto& [kernel, opcode] : expected) {
    SCOPED_TRACE(kernel);
    ASSERT_TRUE(sass.count(kernel));
    const SassStats s = analyze_sass(sass[kernel]);
    int hgmma = 0, arrive = 0;
    for (const SassInstruction& i : s.instructions) {
      // ptxas closes a commit group with an HGMMA that writes RZ under a false predicate
      // (HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT, gsb0): not one of ours.
      const bool ptxas_filler = !i.operands.empty() && i.operands[0] == "RZ";
      if (i.opcode.rfind("HGMMA", 0) == 0 && !ptxas_filler) {
        ++hgmma;
        EXPECT_EQ(i.opcode.rfind(opcode, 0), 0u) << i.opcode;
      }
      arrive += i.opcode.rfind("WARPGROUP.ARRIVE", 0) == 0;
    }
    EXPECT_GE(hgmma, 1);
    EXPECT_GE(arrive, 1) << "no wgmma.fence (WARPGROUP.ARRIVE) before the MMAs";
    EXPECT_GT(s.mma, 0) << "the SASS reader does not count HGMMA as an MMA";
  }
}

// The TMA kernels compile for sm_90a; the box copies are UTMALDG, and the kernel that feeds
// wgmma from them issues HGMMA too.
TEST(WgmmaSass, TmaKernelsIssueUtmaldg) {
  auto sass = sm90a_sass(emu::testing::kTmaKernels);
  ASSERT_FALSE(sass.empty());
  for (const char* kernel : {"tma_box", "tma_then_wgmma"}) {
    ASSERT_TRUE(sass.count(kernel)) << kernel;
    int utmaldg = 0, hgmma = 0;
    for (const SassInstruction& i : analyze_sass(sass[kernel]).instructions) {
      utmaldg += i.opcode.rfind("UTMALDG", 0) == 0;
      hgmma += i.opcode.rfind("HGMMA.64x16x16.F32.BF16", 0) == 0;
    }
    EXPECT_GE(utmaldg, 1) << kernel;
    if (std::string(kernel) == "tma_then_wgmma") {
      EXPECT_EQ(hgmma, 4) << kernel;
    }
  }
}

// The warp-specialized main loop (dg_gemm_sm90.cuh) compiles for sm_90a without spills; its
// consumers issue four HGMMA per k tile and its producer UTMALDG.
TEST(WgmmaSass, WarpSpecializedMainLoopIssuesHgmmaAndUtmaldg) {
  auto sass = sm90a_sass(emu::testing::kWgmmaGemmKernels);
  ASSERT_FALSE(sass.empty());
  for (const auto& [kernel, opcode] : std::vector<std::pair<std::string, std::string>>{
           {"wgmma_gemm_128x64x3", "HGMMA.64x64x16.F32.BF16"},
           {"wgmma_gemm_64x128x2", "HGMMA.64x128x16.F32.BF16"}}) {
    ASSERT_TRUE(sass.count(kernel)) << kernel;
    int hgmma = 0, utmaldg = 0;
    for (const SassInstruction& i : analyze_sass(sass[kernel]).instructions) {
      hgmma += i.opcode.rfind(opcode, 0) == 0;
      utmaldg += i.opcode.rfind("UTMALDG", 0) == 0;
    }
    EXPECT_EQ(hgmma, 4) << kernel;
    EXPECT_EQ(utmaldg, 2) << kernel;
  }
}

}  // namespace
}  // namespace dg
