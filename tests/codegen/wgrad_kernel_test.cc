// The weight-gradient partials kernel (codegen/emit_wgrad.cc) on a small graph that holds each of
// its cases: the three tile shapes (256 x 16, 16 x 256, 64 x 64), operands read along token rows
// with 16-byte loads (bf16 and f32) and element by element (a width that is no multiple of a
// vector, an operand read across tokens), ragged tiles, one chunk and many (Note [Weight-gradient
// staging] in codegen/device/dg_wgrad.cuh, Note [Weight-gradient groups]). Checked against the
// reference evaluator at the token counts around each k step (16), the smallest chunk (64) and
// the point where the chunks grow past it; the last block's sum is the same bits whichever block
// finishes last; an operand off a 16-byte boundary takes the element loads, is counted, and
// gives the aligned run's bits; the products on tensor cores keep f32 accuracy, with the lo
// terms an operand needs and only those (Note [Weight-gradient products on tensor cores]).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "runtime/reference/reference_eval.h"
#include "runtime/runtime_stats.h"
#include "tests/codegen/shifted_input.h"
#include "tests/common/fixtures.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

// dw_a: 200 x 16 (one 256 x 16 tile, bf16 token rows, 16-byte loads); dw_b: 72 x 42 (64 x 64
// tiles, A read across tokens, B's rows of 42 f32 no multiple of 4); dw_c: 12 x 200 (a 16 x 256
// tile, both operands in 16-byte loads). Four tiles want 66 chunks: chunks of 64 tokens up to
// 4224 tokens, then 80.
constexpr const char* kWgradGraph = R"(graph @wgrad_kernel_cases
sym n in [1, inf] div 1
input %g: bf16[n, 200]
input %u: f32[n, 16]
input %h: bf16[72, n]
input %v: f32[n, 42]
input %w: f32[n, 12]
%scale: f32[] = constant() {dtype = f32, value = 2.0}
%gf: f32[n, 200] = cast(%g) {dtype = f32}
%gs: f32[n, 200] = mul(%gf, %scale)
%gt: f32[200, n] = permute(%gs) {dims = [1, 0]}
%dw_a: f32[200, 16] = matmul(%gt, %u)
%hf: f32[72, n] = cast(%h) {dtype = f32}
%dw_b: f32[72, 42] = matmul(%hf, %v)
%wt: f32[12, n] = permute(%w) {dims = [1, 0]}
%dw_c: f32[12, 200] = matmul(%wt, %gs)
output %dw_a, %dw_b, %dw_c
)";

// dw_a alone: one output, as the shifted-input and no-token runs need.
constexpr const char* kOneWgradGraph = R"(graph @wgrad_kernel_one
sym n in [0, inf] div 1
input %g: bf16[n, 200]
input %u: f32[n, 16]
%scale: f32[] = constant() {dtype = f32, value = 2.0}
%gf: f32[n, 200] = cast(%g) {dtype = f32}
%gs: f32[n, 200] = mul(%gf, %scale)
%gt: f32[200, n] = permute(%gs) {dims = [1, 0]}
%dw_a: f32[200, 16] = matmul(%gt, %u)
output %dw_a
)";

// Operands of every exactness: gs (bf16 times 2, exact) by u (f32), ht (bf16 times 1.5, not) by
// v (f32), and u by v (both f32): 3, 6 and 6 bf16 MMAs per product.
constexpr const char* kExactnessGraph = R"(graph @wgrad_exactness
sym n in [1, inf] div 1
input %g: bf16[n, 200]
input %h: bf16[n, 72]
input %u: f32[n, 16]
input %v: f32[n, 40]
%two: f32[] = constant() {dtype = f32, value = 2.0}
%one_and_half: f32[] = constant() {dtype = f32, value = 1.5}
%gf: f32[n, 200] = cast(%g) {dtype = f32}
%gs: f32[n, 200] = mul(%gf, %two)
%gt: f32[200, n] = permute(%gs) {dims = [1, 0]}
%dw_a: f32[200, 16] = matmul(%gt, %u)
%hf: f32[n, 72] = cast(%h) {dtype = f32}
%hs: f32[n, 72] = mul(%hf, %one_and_half)
%ht: f32[72, n] = permute(%hs) {dims = [1, 0]}
%dw_b: f32[72, 40] = matmul(%ht, %v)
%ut: f32[16, n] = permute(%u) {dims = [1, 0]}
%dw_c: f32[16, 40] = matmul(%ut, %v)
output %dw_a, %dw_b, %dw_c
)";

std::string cache_dir() { return testing::shared_cache_dir("dyngen-test-wgrad-kernel"); }

testing::CompiledGraph compile(const char* text) {
  CompileRequest req;
  req.target = "host";
  req.cache_dir = cache_dir();
  return testing::compile_text(text, req);
}

TEST(WgradKernel, OneLaunchWithItsSumAndChecksItsVectorOperands) {
  testing::CompiledGraph c = compile(kWgradGraph);
  ASSERT_NE(c.exe, nullptr);
  int partials = 0;
  for (const KernelLaunch& k : c.exe->plan().kernels) {
    EXPECT_EQ(k.name.find("wgrad_reduce"), std::string::npos) << "the last block sums";
    if (k.name.find("wgrad_partials") == std::string::npos) continue;
    ++partials;
    // g (bf16, rows of 200), u (f32, 16) and w (f32, 12) are read in 16 bytes; h (across tokens)
    // and v (rows of 42) element by element.
    std::map<int, bool> checked;
    for (const CheckedOperand& o : k.checked_operands)
      if (k.buffers[o.param].kind == BufferRef::kInput) checked[k.buffers[o.param].index] = true;
    EXPECT_EQ(checked, (std::map<int, bool>{{0, true}, {1, true}, {4, true}}));
  }
  EXPECT_EQ(partials, 1);
}

TEST(WgradKernel, TokenCountsAroundStepsAndChunks) {
  testing::check_every_token_count(testing::parse_or_fail(kWgradGraph), "n",
                                   {1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 511, 512, 513},
                                   cache_dir(), testing::SweepCompiles::kAtMostOne);
}

TEST(WgradKernel, TokenCountsWhereChunksGrowPast64) {
  testing::check_every_token_count(testing::parse_or_fail(kWgradGraph), "n", {4224, 4225},
                                   cache_dir(), testing::SweepCompiles::kAtMostOne);
}

// Blocks on 4 OS threads in a seeded random warp order: which block of a tile finishes last
// changes with the seed, the sum's order does not.
TEST(WgradKernel, SameBitsWhicheverBlockSumsTheChunks) {
  testing::CompiledGraph c = compile(kWgradGraph);
  ASSERT_NE(c.exe, nullptr);
  const char* modes[][2] = {
      {"DYNGEN_EMU_THREADS", "4"}, {"DYNGEN_EMU_SCHED", "random"}, {"DYNGEN_EMU_SEED", "1"}};
  std::map<std::string, std::string> saved;
  for (const auto& [name, value] : modes) {
    if (const char* old = std::getenv(name)) saved[name] = old;
    setenv(name, value, 1);
  }
  auto inputs = make_random_inputs(c.graph, {{"n", 513}}, 7);
  ASSERT_TRUE(inputs.ok()) << inputs.message();
  auto first = run_on_host(*c.exe, inputs.value());
  setenv("DYNGEN_EMU_SEED", "2", 1);
  auto second = run_on_host(*c.exe, inputs.value());
  for (const auto& [name, value] : modes) {
    const auto it = saved.find(name);
    if (it == saved.end())
      unsetenv(name);
    else
      setenv(name, it->second.c_str(), 1);
  }
  ASSERT_TRUE(first.ok() && second.ok());
  for (size_t o = 0; o < first.value().size(); ++o)
    EXPECT_EQ(first.value()[o].bytes, second.value()[o].bytes) << "output " << o;
}

// f32 accuracy through the bf16 pieces: within 1e-6 of each gradient's scale (the reference sums
// in f32, in order), where the bf16 tolerance of the sweeps above allows 1e-2, two pieces a value
// miss by about 2^-18 of each product and one by 2^-9; the kernel is timed as 6 MMAs a product
// (its most).
TEST(WgradKernel, TensorCoreProductsKeepF32Accuracy) {
  testing::CompiledGraph c = compile(kExactnessGraph);
  ASSERT_NE(c.exe, nullptr);
  for (const KernelLaunch& k : c.exe->plan().kernels)
    if (k.name.find("wgrad_partials") != std::string::npos) EXPECT_EQ(k.split_terms, 6);
  for (int64_t n : {40, 1000}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto inputs = make_random_inputs(c.graph, {{"n", n}}, 11);
    ASSERT_TRUE(inputs.ok()) << inputs.message();
    auto actual = run_on_host(*c.exe, inputs.value());
    ASSERT_TRUE(actual.ok()) << actual.message();
    const RefResult ref = reference_eval(c.graph, inputs.value());
    ASSERT_TRUE(ref.ok()) << ref.error;
    testing::expect_within_scale(actual.value(), ref.outputs, 1e-6);
  }
}

// Note [Unaligned operands]: g 2 bytes past a 16-byte boundary takes the element loads.
TEST(WgradKernel, UnalignedOperandGivesTheAlignedBitsAndIsCounted) {
  testing::CompiledGraph c = compile(kOneWgradGraph);
  ASSERT_NE(c.exe, nullptr);
  for (int64_t n : {17, 200}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto inputs = make_random_inputs(c.graph, {{"n", n}}, 5);
    ASSERT_TRUE(inputs.ok()) << inputs.message();
    const int64_t before = runtime_stats().unaligned_launches;
    auto aligned = run_on_host(*c.exe, inputs.value());
    ASSERT_TRUE(aligned.ok()) << aligned.message();
    EXPECT_EQ(runtime_stats().unaligned_launches, before);
    ::testing::internal::CaptureStderr();
    const std::vector<uint8_t> shifted = run_with_shifted_input(*c.exe, inputs.value(), 0);
    ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(shifted, aligned.value()[0].bytes);
    EXPECT_EQ(runtime_stats().unaligned_launches, before + 1);
  }
}

// No tokens: the gradient is zero, written over whatever the caller's output held.
TEST(WgradKernel, NoTokensWriteZeros) {
  testing::CompiledGraph c = compile(kOneWgradGraph);
  ASSERT_NE(c.exe, nullptr);
  auto inputs = make_random_inputs(c.graph, {{"n", 0}}, 5);
  ASSERT_TRUE(inputs.ok()) << inputs.message();
  std::vector<dg_tensor> in(inputs.value().size());
  for (size_t i = 0; i < in.size(); ++i) {
    const HostTensor& t = inputs.value()[i];
    in[i].data = const_cast<uint8_t*>(t.bytes.data());
    in[i].rank = t.rank();
    in[i].dtype = static_cast<int32_t>(t.dtype);
    for (int d = 0; d < t.rank(); ++d) in[i].shape[d] = t.shape[d];
  }
  dg_tensor out{};
  size_t workspace_bytes = 0;
  ASSERT_TRUE(
      c.exe->prepare(in.data(), static_cast<int>(in.size()), &out, 1, &workspace_bytes).ok());
  std::vector<float> y(200 * 16, std::nanf(""));
  out.data = y.data();
  std::vector<uint8_t> workspace(workspace_bytes + 256);
  ASSERT_TRUE(
      c.exe->launch(in.data(), static_cast<int>(in.size()), &out, 1, workspace.data(), nullptr)
          .ok());
  for (float v : y) ASSERT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace dg
