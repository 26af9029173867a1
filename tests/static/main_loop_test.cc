// The tensor-core GEMM main loop's machine code (Note [Lean main loop] in
// codegen/device/dg_gemm_sm80.cuh): for every kernel with tensor-core MMAs in the expert graphs at
// the models' sizes (the seed's OLMoE shapes and Phi-3.5-MoE's, forward and backward), compiled for
// sm_80 and sm_90a, the main MMA loop (Note [Loops in SASS] in runtime/model/sass_stats.h) holds
// no inner loop and issues at most 2.5 instructions per HMMA on sm_80 (the target) and 2.75 on
// sm_90a, and ptxas spills nothing. On sm_90a ptxas schedules the same source a few instructions
// longer in some kernels (82 for 32 HMMA in the backward's transposed-B GEMM, where sm_80 takes
// 79). The sm_90a wgmma kernels (Note [sm_90a GEMMs]) are held to the same figure per HMMA's worth
// of FLOPs (an HGMMA.64x128x16 does sixteen HMMAs' work per warp). The DBRX fixture is a reduced
// model (hidden 64): its N = 64 GEMMs take a two-warp tile whose threads copy twice the chunks per
// MMA (2.56 per MMA on sm_80), so it is not among them. The small-M tiles whose warp tiles are
// sliced over K (Note [Sliced K] in codegen/device/dg_gemm_tile_sm80.cuh) run one or two k16
// steps per warp and k tile, so the k tile's fixed cost (its wait and barrier, the copies'
// predicate and addresses, the stage rotation: about 20 instructions) weighs on 16 HMMA, not 32
// or 64: they are held to 4, which still leaves the loop below its tensor time (an HMMA.16816 is
// 4096 FLOPs, 4 clocks of a sub-partition's tensor unit at the H200's dense peak of 1024 FLOPs a
// clock; mma.sync reaches about two thirds of it). The same kernels' epilogues store in pairs
// (Note [Paired stores] in codegen/device/dg_store.cuh).
#include <gtest/gtest.h>

#include <map>

#include "ir/graph_io.h"
#include "runtime/compiler.h"
#include "runtime/model/sass_stats.h"
#include "runtime/model/sass_tools.h"
#include "tests/common/fixtures.h"
#include "tests/common/machine_code.h"
#include "tests/common/temp_dir.h"

namespace dg {
namespace {

double max_instructions_per_m16n8k16(const std::string& arch, const KernelLaunch& k) {
  if (k.summary.find("K over") != std::string::npos) return 4.0;  // Note [Sliced K]
  return arch == "sm_80" ? 2.5 : 2.75;
}

std::string cache_dir() { return testing::run_cache_dir("dyngen-static-test-cache"); }

std::string join(const std::vector<std::string>& operands) {
  std::string s;
  for (const std::string& o : operands) s += (s.empty() ? "" : ", ") + o;
  return s;
}

// A fixture compiled for `arch` (through the test's kernel cache) and its kernels' SASS by name.
struct CompiledSass {
  CompileOutcome outcome;
  std::map<std::string, std::string> sass;
  std::vector<KernelResources> report;  // both binaries'
};

void compile_with_sass(const char* fixture, const char* arch, CompiledSass* out) {
  std::string why;
  const std::string tool = find_cuobjdump(&why);
  ASSERT_FALSE(tool.empty()) << why << "\nscripts/setup.sh installs cuobjdump and nvdisasm.";
  LoadResult g = load_graph_file(testing::fixture_path(std::string(fixture) + ".dgir"));
  ASSERT_TRUE(g.ok()) << g.error;
  CompileRequest req;
  req.target = arch;
  req.cache_dir = cache_dir();
  out->outcome = compile_graph(g.graph, req);
  ASSERT_TRUE(out->outcome.ok()) << out->outcome.error;
  // The fallbacks too, compiled now (Note [Fallbacks compiled on first need]).
  auto code = testing::machine_code(tool, *out->outcome.executable, arch, cache_dir());
  ASSERT_TRUE(code.ok()) << code.message();
  out->sass = std::move(code->sass);
  out->report = std::move(code->report);
}

class MainLoop : public ::testing::TestWithParam<const char*> {};

TEST_P(MainLoop, FewInstructionsPerMmaAndNoInnerLoop) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    CompiledSass c;
    ASSERT_NO_FATAL_FAILURE(compile_with_sass(GetParam(), arch, &c));
    const CompileOutcome& o = c.outcome;
    auto& sass = c.sass;
    for (const KernelResources& r : c.report) {
      EXPECT_EQ(r.spill_store_bytes, 0) << r.name;
      EXPECT_EQ(r.spill_load_bytes, 0) << r.name;
    }
    int tensor_core_kernels = 0;
    for (const KernelLaunch& k : o.executable->plan().kernels) {
      ASSERT_TRUE(sass.count(k.name)) << k.name;
      const SassStats s = analyze_sass(sass[k.name]);
      // The rank-r split-K kernels multiply N = 16-64 columns per streamed f32 k tile: their
      // loop is bound by staging, not by its MMAs (Note [Rank-r split-K on tensor cores]), and
      // the lean-main-loop budget is for GEMM tiles.
      if (s.mma == 0 || k.split_terms > 0) continue;
      ++tensor_core_kernels;
      ASSERT_GE(s.main_mma_loop, 0) << k.name << " has MMAs but no loop around them";
      const SassLoop& loop = s.loops[s.main_mma_loop];
      EXPECT_EQ(loop.inner_loops, 0) << k.name << ": " << k.summary;
      std::string body;  // what the loop issues besides its MMAs, for a failure message
      for (int i = loop.begin; i <= loop.end; ++i)
        if (mma_flops_per_warp(s.instructions[i].opcode) == 0)
          body += "\n  " + s.instructions[i].opcode + " " + join(s.instructions[i].operands);
      const double per_mma = s.instructions_per_m16n8k16();
      EXPECT_LE(per_mma, max_instructions_per_m16n8k16(arch, k))
          << k.name << ": " << loop.instructions << " instructions for " << loop.mma << " MMAs; "
          << k.summary << "\nthe loop besides its MMAs:" << body;
      std::cout << "[ main loop ] " << GetParam() << " " << arch << " " << k.name << ": "
                << loop.instructions << " instructions, " << loop.mma << " MMA, " << per_mma
                << " per HMMA's worth\n";
    }
    EXPECT_GE(tensor_core_kernels, 2) << "the expert's GEMMs should run on tensor cores";
  }
}

// Note [Paired stores] (codegen/device/dg_store.cuh): a tensor-core GEMM whose outputs have an even
// N writes them a pair at a time, its only epilogue; a call whose outputs are off a pair's
// boundary runs the GEMM's fallback kernel, which stores element by element (Note [GEMM
// fallbacks]). Counting global stores by width: a paired kernel has no 2-byte store, a 4-byte one
// for its bf16 pairs (none when every output is f32) and an 8-byte one for its f32 pairs; a
// fallback kernel has no 8-byte store and, for bf16 outputs, 2-byte ones.
TEST_P(MainLoop, EpiloguesStoreInPairs) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    CompiledSass c;
    ASSERT_NO_FATAL_FAILURE(compile_with_sass(GetParam(), arch, &c));
    int paired_kernels = 0, fallbacks = 0;
    for (const KernelLaunch& k : c.outcome.executable->plan().kernels) {
      bool bf16_pairs = false, f32_pairs = false;
      for (const CheckedOperand& o : k.checked_operands)
        if (o.written) (o.alignment == 4 ? bf16_pairs : f32_pairs) = true;
      if (!bf16_pairs && !f32_pairs && !k.fallback) continue;
      int by_width[3] = {0, 0, 0};  // 2-, 4- and 8-byte global stores
      for (const SassInstruction& i : analyze_sass(c.sass[k.name]).instructions) {
        if (i.opcode.rfind("STG.E", 0) != 0) continue;
        const std::string width = i.opcode.substr(5);
        ++by_width[width == ".U16" ? 0 : width == ".64" ? 2 : 1];
        EXPECT_TRUE(width.empty() || width == ".U16" || width == ".64")
            << k.name << " " << i.opcode;
      }
      SCOPED_TRACE(k.name + ": " + std::to_string(by_width[0]) + " 2-byte, " +
                   std::to_string(by_width[1]) + " 4-byte, " + std::to_string(by_width[2]) +
                   " 8-byte stores");
      if (k.fallback) {
        ++fallbacks;
        EXPECT_EQ(by_width[2], 0);
        EXPECT_GT(by_width[0] + by_width[1], 0);
        continue;
      }
      ++paired_kernels;
      EXPECT_EQ(by_width[0], 0) << "an element store in a paired epilogue";
      EXPECT_EQ(by_width[1] > 0, bf16_pairs);
      EXPECT_EQ(by_width[2] > 0, f32_pairs);
    }
    EXPECT_GE(paired_kernels, 2) << "the expert's GEMMs should store in pairs";
    EXPECT_GE(fallbacks, 1) << "a GEMM that stores in pairs needs its fallback";
  }
}

// Note [Weight-gradient products on tensor cores] (codegen/device/dg_wgrad.cuh): the weight-
// gradient partials multiply on tensor cores (no FFMA loop is left), four m16n8 tiles a warp with
// one to three MMAs each; and Note [Weight-gradient k loop] (codegen/emit_wgrad.cc): the main
// loop, the one for aligned operands, loads its stages 16 bytes at a time, with no element path.
TEST(WeightGradientLoops, MultiplyOnTensorCoresAndLoadSixteenBytesAtATime) {
  for (const char* fixture : {"seed_expert_mlp_backward", "phi35moe_expert_mlp_backward"}) {
    for (const char* arch : {"sm_80", "sm_90a"}) {
      SCOPED_TRACE(std::string(fixture) + " " + arch);
      CompiledSass c;
      ASSERT_NO_FATAL_FAILURE(compile_with_sass(fixture, arch, &c));
      int kernels = 0;
      for (const KernelLaunch& k : c.outcome.executable->plan().kernels) {
        if (k.name.find("wgrad_partials") == std::string::npos) continue;
        ++kernels;
        EXPECT_GE(k.split_terms, 1) << k.name;
        const SassStats s = analyze_sass(c.sass[k.name]);
        EXPECT_TRUE(s.simt_loops.empty()) << k.name << ": an FMA loop is left";
        ASSERT_GE(s.main_mma_loop, 0) << k.name;
        const SassLoop& loop = s.loops[s.main_mma_loop];
        EXPECT_TRUE(loop.mma == 4 || loop.mma == 8 || loop.mma == 12) << loop.mma << " MMAs";
        for (int j = loop.begin; j <= loop.end; ++j) {
          const std::string& op = s.instructions[j].opcode;
          if (op.rfind("LDG", 0) == 0)
            EXPECT_NE(op.find(".128"), std::string::npos) << k.name << ": " << op;
        }
      }
      EXPECT_EQ(kernels, 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Experts, MainLoop,
                         ::testing::Values("seed_expert_mlp", "seed_expert_mlp_backward",
                                           "phi35moe_expert_mlp", "phi35moe_expert_mlp_backward"));

}  // namespace
}  // namespace dg
