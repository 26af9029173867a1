// The rank-r split-K kernel (Note [Last block reduces] in codegen/emit_rank_gemm.cc): one launch
// per rank-r product, so the LoRA forwards run in at most 4 launches at the seed's and Phi's
// token counts; and its numerics under the host emulation's adversarial modes at the token counts
// around each tile and split boundary, the same bits whatever order the CTAs finish in, and the
// arrival counters left at zero by every call (a counter left over would leave a tile unwritten
// in the next call of the sweep).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/emit_cuda.h"
#include "passes/pipeline.h"
#include "runtime/compiler.h"
#include "runtime/host_run.h"
#include "runtime/reference/reference_eval.h"
#include "tests/common/fixtures.h"
#include "tests/common/temp_dir.h"
#include "tests/common/token_sweep.h"

namespace dg {
namespace {

using testing::parse_or_fail;

// A value of `symbol` bound to n, for evaluating the plan's grid expressions.
std::optional<int64_t> at(const SymExpr& e, int64_t n) {
  return e.evaluate([n](const SymExpr&) -> std::optional<int64_t> { return n; });
}

// The kernels a call with `n` tokens launches: every kernel with a non-empty grid, fallbacks
// aside (they run only when a call's addresses refuse the kernel chosen by M).
std::vector<std::string> launched(const KernelPlan& plan, int64_t n) {
  std::vector<std::string> names;
  for (const KernelLaunch& k : plan.kernels) {
    if (k.fallback) continue;
    bool empty = false;
    for (const SymExpr& d : k.grid) empty = empty || at(d, n).value_or(0) <= 0;
    if (!empty) names.push_back(k.name);
  }
  return names;
}

// A DBRX-shaped expert forward (hidden 6144, FFN 10752, SwiGLU, no LoRA).
Graph dbrx_forward() {
  return parse_or_fail(R"(graph @dbrx_expert_forward
sym s in [2, inf] div 1
input %x: bf16[s, 6144]
input %w1: bf16[10752, 6144]
input %v1: bf16[10752, 6144]
input %w2: bf16[6144, 10752]
%gate: bf16[s, 10752] = linear(%x, %w1)
%up: bf16[s, 10752] = linear(%x, %v1)
%act: bf16[s, 10752] = silu(%gate)
%h: bf16[s, 10752] = mul(%act, %up)
%y: bf16[s, 6144] = linear(%h, %w2)
output %y
)");
}

TEST(RankSplitK, LoraForwardsRunInAtMostFourLaunches) {
  const std::vector<std::pair<std::string, Graph>> graphs = {
      {"seed", testing::load_fixture("seed_expert_mlp.dgir")},
      {"phi", testing::load_fixture("phi35moe_expert_mlp.dgir")},
      {"dbrx", dbrx_forward()}};
  for (const auto& [name, g] : graphs)
    for (const std::string arch : {"sm_80", "sm_90a"}) {
      const KernelPlan plan = emit_cuda(run_pipeline(g), codegen_options_for(arch, {}));
      for (int64_t n : {2, 512, 4096}) {
        const std::vector<std::string> names = launched(plan, n);
        std::string listing;
        for (const std::string& k : names) listing += k + "\n";
        EXPECT_GE(names.size(), 2u) << name << " " << arch << " at " << n;  // two GEMMs at least
        EXPECT_LE(names.size(), 4u) << name << " " << arch << " at " << n << ":\n" << listing;
        for (const std::string& k : names)
          EXPECT_EQ(k.find("_reduce"), std::string::npos) << name << " " << arch << ": " << k;
      }
    }
}

// x @ A^T (linear, A's rows contiguous along K) or x @ W (matmul, W's rows contiguous along N),
// from bf16 x widened to f32 as the LoRA graphs do, with `products` rank-r products of x
// (2: the gate/up pair, side by side in one kernel) and a scaled epilogue on the first. K = 296
// ends in a partial k-tile.
std::string rank_graph(int rank, int products, bool linear) {
  const std::string K = "296", R = std::to_string(rank);
  std::string s = "graph @rank_products\nsym s in [0, inf] div 1\ninput %x: bf16[s, " + K + "]\n";
  for (int p = 0; p < products; ++p)
    s += "input %a" + std::to_string(p) + ": f32[" + (linear ? R + ", " + K : K + ", " + R) + "]\n";
  s += "%xf: f32[s, " + K + "] = cast(%x) {dtype = f32}\n";
  for (int p = 0; p < products; ++p) {
    const std::string P = std::to_string(p);
    s += "%u" + P + ": f32[s, " + R + "] = " + (linear ? "linear" : "matmul") + "(%xf, %a" + P +
         ")\n";
  }
  s += "%two: f32[] = constant() {dtype = f32, value = 2.0}\n";
  s += "%y0: f32[s, " + R + "] = mul(%u0, %two)\noutput %y0";
  for (int p = 1; p < products; ++p) s += ", %u" + std::to_string(p);
  return s + "\n";
}

struct RankCase {
  std::string name;
  int rank, products;
  bool linear;
};

void PrintTo(const RankCase& c, std::ostream* os) { *os << c.name; }

class RankSplitKNumerics : public ::testing::TestWithParam<RankCase> {};

// The token counts around the 16/32/64-row tiles and the K split's changes (read from the plan's
// grid: every n where the split count differs from n - 1's, and its neighbours), up to the
// count where one split remains.
std::vector<int64_t> token_counts(const KernelPlan& plan) {
  std::set<int64_t> counts = {1, 2, 31, 32, 33, 63, 64, 65, 511, 512, 513, 1024, 1025};
  const KernelLaunch* splitk = nullptr;
  for (const KernelLaunch& k : plan.kernels)
    if (k.name.find("_splitk") != std::string::npos) splitk = &k;
  EXPECT_NE(splitk, nullptr) << "no rank-r split-K kernel";
  if (splitk == nullptr) return {counts.begin(), counts.end()};
  int64_t previous = *at(splitk->grid[1], 1);
  for (int64_t n = 2; previous > 1; ++n) {
    const int64_t splits = *at(splitk->grid[1], n);
    if (splits != previous) counts.insert({n - 1, n, n + 1});
    previous = splits;
  }
  return {counts.begin(), counts.end()};
}

TEST_P(RankSplitKNumerics, MatchesTheReferenceAndGivesTheSameBitsInEveryOrder) {
  const RankCase& c = GetParam();
  testing::TempDir cache;
  CompileRequest req;
  req.target = "host";
  req.cache_dir = cache.path();
  const testing::CompiledGraph cg =
      testing::compile_text(rank_graph(c.rank, c.products, c.linear), req);
  ASSERT_NE(cg.exe, nullptr);
  const std::vector<int64_t> counts = token_counts(cg.exe->plan());
  // Blocks on 4 OS threads, a random warp order, seeded: CTAs finish in an order that changes
  // with the seed, so the CTA that sums a tile's partials does too.
  const char* modes[][2] = {{"DYNGEN_EMU_THREADS", "4"},
                            {"DYNGEN_EMU_SCHED", "random"},
                            {"DYNGEN_EMU_ASYNC", "random"},
                            {"DYNGEN_EMU_SEED", "1"}};
  std::map<std::string, std::string> saved;
  for (const auto& [name, value] : modes) {
    if (const char* old = std::getenv(name)) saved[name] = old;
    setenv(name, value, 1);
  }
  for (int64_t n : counts) {
    SCOPED_TRACE("s=" + std::to_string(n));
    setenv("DYNGEN_EMU_SEED", "1", 1);
    testing::expect_matches_reference_at(cg.graph, *cg.exe, "s", n, 100 + n,
                                         ToleranceMode::kTensorScale);
    auto inputs = make_random_inputs(cg.graph, {{"s", n}}, 7);
    ASSERT_TRUE(inputs.ok()) << inputs.message();
    auto first = run_on_host(*cg.exe, inputs.value());
    setenv("DYNGEN_EMU_SEED", "2", 1);
    auto second = run_on_host(*cg.exe, inputs.value());
    ASSERT_TRUE(first.ok() && second.ok());
    // f32-class accuracy through the bf16 split (Note [Rank-r split-K on tensor cores]): within
    // 1e-4 of the tensor's scale, where the bf16 tolerance above allows 1e-2 and bf16 products
    // without their lo terms miss by several 1e-3.
    const RefResult ref = reference_eval(cg.graph, inputs.value());
    ASSERT_TRUE(ref.ok()) << ref.error;
    testing::expect_within_scale(first.value(), ref.outputs, 1e-4);
    for (size_t o = 0; o < first.value().size(); ++o)
      EXPECT_EQ(first.value()[o].bytes, second.value()[o].bytes) << "output " << o;
  }
  for (const auto& [name, value] : modes) {
    const auto it = saved.find(name);
    if (it == saved.end())
      unsetenv(name);
    else
      setenv(name, it->second.c_str(), 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RankSplitKNumerics,
                         ::testing::Values(RankCase{"gate_up_r16_linear", 16, 2, true},
                                           RankCase{"r8_linear", 8, 1, true},
                                           RankCase{"r64_linear", 64, 1, true},
                                           RankCase{"gate_up_r16_matmul", 16, 2, false}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dg
