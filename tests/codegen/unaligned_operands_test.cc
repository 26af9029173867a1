// Note [Unaligned operands]: a GEMM operand off a 16-byte boundary (a view with a storage offset)
// takes a slow path: the tensor-core GEMM's fallback kernel (Note [GEMM fallbacks]), the rank-r
// partials' own element-load loop. Under host emulation: the results equal the aligned run's bit
// for bit, every launch that takes the slow path is counted (dg_stats.unaligned_launches) and
// only the first one of an executable is logged; aligned calls count nothing. The same for an
// output that a GEMM epilogue would write in pairs (Note [Paired stores] in
// codegen/device/dg_store.cuh) at an address off a pair's boundary. The emulation faults where a
// GPU would (cp.async off 16 bytes, a pair's store off its boundary), so a test here cannot pass
// with the aligned-only kernel run on such an address.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "ir/text_format.h"
#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "tests/codegen/shifted_input.h"
#include "tests/common/fixtures.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

using testing::replace_in_shapes;

// A LoRA linear: the base product on tensor cores, x @ A^T through the rank-r partials kernel.
constexpr const char* kLoraLinear = R"(graph @lora_linear
sym n in [0, inf] div 1
input %x: bf16[n, 64]
input %w: bf16[48, 64]
input %a: bf16[8, 64]
input %b: bf16[48, 8]
%base: bf16[n, 48] = linear(%x, %w)
%u: bf16[n, 8] = linear(%x, %a)
%up: bf16[n, 48] = linear(%u, %b)
%y: bf16[n, 48] = add(%base, %up)
output %y
)";

// kLoraLinear with 40 output columns: an executable of its own, which has logged nothing yet.
std::string lora_linear_40() {
  std::string text = replace_in_shapes(kLoraLinear, {{"48", "40"}});
  return text.replace(text.find("@lora_linear"), 12, "@lora_linear_40");
}

using Compiled = testing::CompiledGraph;

Compiled compile_lora_linear(const std::string& text = kLoraLinear) {
  CompileRequest req;
  req.target = "host";
  req.cache_dir = testing::shared_cache_dir("dyngen-unaligned-cache");
  return testing::compile_text(text, req);
}

// The kernels a call launches that check input `input`'s alignment: one per GEMM launch site
// (its tile variants check the same operands).
int64_t sites_checking(const KernelPlan& plan, int input) {
  int64_t sites = 0;
  for (const KernelLaunch& k : plan.kernels) {
    if (k.variant != 0) continue;
    for (const CheckedOperand& c : k.checked_operands)
      if (k.buffers[c.param].kind == BufferRef::kInput && k.buffers[c.param].index == input) {
        ++sites;
        break;
      }
  }
  return sites;
}

int64_t unaligned_launches() { return runtime_stats().unaligned_launches; }

// The kernels a call launches that write output 0 in pairs when its address allows it.
int64_t sites_pairing_output(const KernelPlan& plan) {
  int64_t sites = 0;
  for (const KernelLaunch& k : plan.kernels) {
    if (k.variant != 0) continue;
    for (const CheckedOperand& c : k.checked_operands)
      if (c.written && k.buffers[c.param].kind == BufferRef::kOutput) {
        EXPECT_EQ(c.alignment, 4) << k.name << ": a pair of bf16";
        ++sites;
        break;
      }
  }
  return sites;
}

TEST(UnalignedOperands, GemmKernelsListTheAddressesTheyCheck) {
  Compiled c = compile_lora_linear();
  ASSERT_TRUE(c.exe);
  // x feeds the tensor-core GEMM and the rank-r partials; w and a are read by one GEMM each.
  EXPECT_EQ(sites_checking(c.exe->plan(), 0), 2);
  EXPECT_EQ(sites_checking(c.exe->plan(), 1), 1);
  EXPECT_EQ(sites_checking(c.exe->plan(), 2), 1);
}

TEST(UnalignedOperands, SlowPathIsCountedLoggedOnceAndExact) {
  Compiled c = compile_lora_linear();
  ASSERT_TRUE(c.exe);
  const int64_t n = 37;
  auto inputs = make_random_inputs(c.graph, {{"n", n}}, 3);
  ASSERT_TRUE(inputs.ok()) << inputs.message();

  const int64_t before = unaligned_launches();
  auto aligned = run_on_host(*c.exe, inputs.value());
  ASSERT_TRUE(aligned.ok()) << aligned.message();
  EXPECT_EQ(unaligned_launches(), before) << "aligned operands took the slow path";

  for (int shifted : {0, 1, 2}) {
    const int64_t start = unaligned_launches();
    ::testing::internal::CaptureStderr();
    const std::vector<uint8_t> first = run_with_shifted_input(*c.exe, inputs.value(), shifted);
    const std::vector<uint8_t> second = run_with_shifted_input(*c.exe, inputs.value(), shifted);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(first, aligned.value()[0].bytes) << "input " << shifted;
    EXPECT_EQ(second, aligned.value()[0].bytes) << "input " << shifted;
    const int64_t sites = sites_checking(c.exe->plan(), shifted);
    EXPECT_EQ(unaligned_launches() - start, 2 * sites) << "input " << shifted;
    // One executable logs once, whichever operand it was.
    const size_t at = log.find("dyngen: warning: kernel");
    if (shifted == 0) {
      ASSERT_NE(at, std::string::npos) << log;
      EXPECT_NE(log.find("input 0"), std::string::npos) << log;
      EXPECT_NE(log.find("2 bytes past a 16-byte boundary"), std::string::npos) << log;
      EXPECT_EQ(log.find("dyngen: warning", at + 1), std::string::npos) << log;
    } else {
      EXPECT_EQ(at, std::string::npos) << log;
    }
  }
}

// The paired kernel would fault on the shifted output (a GPU does, and so does the emulation's
// dg_store_pair), so equal results show the fallback kernel wrote them (Note [GEMM fallbacks]).
TEST(UnalignedOperands, OutputOffAPairBoundaryRunsTheFallback) {
  const int64_t builds = runtime_stats().fallback_builds;
  Compiled c = compile_lora_linear(lora_linear_40());
  ASSERT_TRUE(c.exe);
  const int64_t sites = sites_pairing_output(c.exe->plan());
  EXPECT_EQ(sites, 1) << "the tensor-core GEMM writes y";
  auto inputs = make_random_inputs(c.graph, {{"n", 37}}, 5);
  ASSERT_TRUE(inputs.ok()) << inputs.message();
  const int64_t before = unaligned_launches();
  auto aligned = run_on_host(*c.exe, inputs.value());
  ASSERT_TRUE(aligned.ok()) << aligned.message();
  EXPECT_EQ(unaligned_launches(), before) << "an aligned output was written element by element";
  // Note [Fallbacks compiled on first need]: not with the graph, nor for an aligned call.
  EXPECT_FALSE(c.exe->plan().fallback_source.empty());
  EXPECT_EQ(runtime_stats().fallback_builds, builds);

  ::testing::internal::CaptureStderr();
  const std::vector<uint8_t> first = run_shifted(*c.exe, inputs.value(), -1, true);
  const std::vector<uint8_t> second = run_shifted(*c.exe, inputs.value(), -1, true);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(runtime_stats().fallback_builds - builds, 1) << "built by the first call that needs it";
  EXPECT_EQ(first, aligned.value()[0].bytes);
  EXPECT_EQ(second, aligned.value()[0].bytes);
  EXPECT_EQ(unaligned_launches() - before, 2 * sites);
  const size_t at = log.find("dyngen: warning: kernel");
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_NE(log.find("writes output 0 at an address that is 2 bytes past a 4-byte boundary, so the "
                     "call runs its GEMM's fallback kernel, which stores element by element"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("dyngen: warning", at + 1), std::string::npos) << log;
}

// A GEMM whose epilogue reads another input of its output's shape: h, bf16, loaded in pairs by
// the paired kernel (Note [Epilogue operand loads] in codegen/device/dg_epilogue_loads.cuh).
constexpr const char* kGatedLinear = R"(graph @gated_linear
sym n in [0, inf] div 1
input %x: bf16[n, 64]
input %w: bf16[40, 64]
input %h: bf16[n, 40]
%base: bf16[n, 40] = linear(%x, %w)
%y: bf16[n, 40] = mul(%base, %h)
output %y
)";

// The paired kernel would fault on h off its pairs' boundary (as a GPU does, so does the
// emulation's paired load), so results equal to the aligned run's show the fallback loaded it.
TEST(UnalignedOperands, EpilogueOperandOffAPairBoundaryRunsTheFallback) {
  Compiled c = compile_lora_linear(kGatedLinear);
  ASSERT_TRUE(c.exe);
  int64_t sites = 0;
  for (const KernelLaunch& k : c.exe->plan().kernels)
    for (const CheckedOperand& o : k.checked_operands)
      if (o.read_in_pairs && k.variant == 0) {
        EXPECT_EQ(o.alignment, 4) << k.name << ": a pair of bf16";
        EXPECT_EQ(k.buffers[o.param].index, 2) << k.name << ": h";
        ++sites;
      }
  EXPECT_EQ(sites, 1) << "the tensor-core GEMM reads h in pairs";
  for (int64_t n : {1, 15, 16, 17, 37, 64, 65, 129}) {
    auto inputs = make_random_inputs(c.graph, {{"n", n}}, 6);
    ASSERT_TRUE(inputs.ok()) << inputs.message();
    const int64_t before = unaligned_launches();
    auto aligned = run_on_host(*c.exe, inputs.value());
    ASSERT_TRUE(aligned.ok()) << aligned.message();
    EXPECT_EQ(unaligned_launches(), before) << "an aligned operand was loaded element by element";
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(run_with_shifted_input(*c.exe, inputs.value(), 2), aligned.value()[0].bytes) << n;
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(unaligned_launches() - before, sites) << n;
    if (n == 1)
      EXPECT_NE(log.find("reads input 2 at an address that is 2 bytes past a 4-byte boundary, so "
                         "the call runs its GEMM's fallback kernel, which loads it element by "
                         "element, not in pairs"),
                std::string::npos)
          << log;
  }
}

TEST(UnalignedOperands, NoTokensLaunchNothingAndCountNothing) {
  Compiled c = compile_lora_linear();
  ASSERT_TRUE(c.exe);
  auto inputs = make_random_inputs(c.graph, {{"n", 0}}, 4);
  ASSERT_TRUE(inputs.ok()) << inputs.message();
  const int64_t before = unaligned_launches();
  run_with_shifted_input(*c.exe, inputs.value(), 1);
  EXPECT_EQ(unaligned_launches(), before);
}

}  // namespace
}  // namespace dg
