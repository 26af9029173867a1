// The wgmma primitive's machine code (codegen/device/dg_wgmma.cuh): the wgmma test kernels
// (tests/emu/wgmma_kernels.h), compiled by NVRTC for sm_90a as every device compile is, issue
// HGMMA.64xNx16.F32.BF16 with the N they ask for (16 to 256), spill nothing, and issue a
// warpgroup fence (WARPGROUP.ARRIVE) before their MMAs; no GPU needed.
#include <gtest/gtest.h>

#include "runtime/compiler.h"
#include "runtime/emu/device_headers.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/ptxas_report.h"
#include "runtime/sass_stats.h"
#include "runtime/sass_tools.h"
#include "tests/emu/wgmma_kernels.h"

namespace dg {
namespace {

TEST(WgmmaSass, KernelsIssueHgmmaOnSm90a) {
  std::string why;
  const std::string tool = find_cuobjdump(&why);
  ASSERT_FALSE(tool.empty()) << why << "\nscripts/setup.sh installs cuobjdump and nvdisasm.";
  std::vector<CudaHeader> headers;
  for (const EmbeddedFile& f : device_headers())
    headers.push_back({std::string(f.name), std::string(f.content)});
  auto compiled =
      nvrtc_compile(emu::testing::wgmma_kernels(), headers, device_compile_options("sm_90a"));
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  for (const KernelResources& r : parse_ptxas_log(compiled->log)) {
    EXPECT_EQ(r.spill_store_bytes, 0) << r.name;
    EXPECT_EQ(r.spill_load_bytes, 0) << r.name;
  }
  std::string error;
  auto sass = sass_by_function(tool, compiled->binary, &error);
  ASSERT_FALSE(sass.empty()) << error;
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
      const bool placeholder = !i.operands.empty() && i.operands[0] == "RZ";
      if (i.opcode.rfind("HGMMA", 0) == 0 && !placeholder) {
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

}  // namespace
}  // namespace dg
