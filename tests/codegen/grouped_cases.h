// Test helper: the grouped-experts test graph (routing, grouped_mm, grouped_mm_wgrad), routings
// with empty experts and with every row on one expert, and the emulation's adversarial modes
// (tests/codegen/grouped_mm_test.cc, grouped_mm_sm90_test.cc).
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/host_run.h"

namespace dg {

struct GroupedCase {
  std::string name;
  int64_t experts, top_k;
  DType dtype;
  bool fused, kn;
  int64_t N, K;
  std::vector<int64_t> tokens;
};

inline void PrintTo(const GroupedCase& c, std::ostream* os) { *os << c.name; }

// Routes t tokens x k slots, then out = grouped_mm(a, offs, weights) and
// dw = grouped_mm_wgrad(g, a, offs) over the k * t routed rows.
inline Graph grouped_graph(const GroupedCase& c) {
  GraphBuilder b(c.name);
  SymExpr t = b.symbol("t", 1);
  ValueId idx = b.input(DType::kI64, {t, c.top_k});
  ValueId offs = b.op(OpKind::kExpertOffsets, {idx}, {{"num_experts", c.experts}});
  ValueId a = b.input(c.dtype, {c.top_k * t, c.K});
  std::vector<ValueId> in{a, offs};
  const std::vector<SymExpr> one =
      c.kn ? std::vector<SymExpr>{c.K, c.N} : std::vector<SymExpr>{c.N, c.K};
  if (c.fused) {
    in.push_back(b.input(c.dtype, {c.experts, one[0], one[1]}));
  } else {
    for (int64_t e = 0; e < c.experts; ++e) in.push_back(b.input(c.dtype, one));
  }
  b.output(b.op(OpKind::kGroupedMm, in, {{"w_layout", int64_t{c.kn ? 1 : 0}}}));
  ValueId g = b.input(c.dtype, {c.top_k * t, c.N});
  b.output(b.op(OpKind::kGroupedMmWgrad, {g, a, offs}));
  return b.finish();
}

// Routings of the same tokens: random over all experts; every row on expert E - 1; two experts
// only (0 and E / 2, every other one empty).
enum class Routing { kRandom, kOneExpert, kTwoExperts };

inline void route(HostTensor& idx, Routing r, int64_t experts) {
  for (int64_t p = 0; p < idx.numel(); ++p) {
    if (r == Routing::kOneExpert) idx.set_int(p, experts - 1);
    if (r == Routing::kTwoExperts) idx.set_int(p, p % 3 == 0 ? experts / 2 : 0);
  }
}

// Sets the emulation's adversarial modes for its lifetime (Note [Adversarial emulation]).
class AdversarialEmulation {
 public:
  AdversarialEmulation() {
    for (const auto& [name, value] : kModes) {
      if (const char* old = std::getenv(name)) saved_[name] = old;
      setenv(name, value, 1);
    }
  }
  ~AdversarialEmulation() {
    for (const auto& [name, value] : kModes) {
      auto it = saved_.find(name);
      if (it == saved_.end())
        unsetenv(name);
      else
        setenv(name, it->second.c_str(), 1);
    }
  }

 private:
  static constexpr const char* kModes[][2] = {{"DYNGEN_EMU_THREADS", "4"},
                                              {"DYNGEN_EMU_SCHED", "random"},
                                              {"DYNGEN_EMU_ASYNC", "random"},
                                              {"DYNGEN_EMU_SEED", "3"}};
  std::map<std::string, std::string> saved_;
};

// The same bits under the adversarial schedules as under the plain emulation (no float atomics,
// fixed orders).
inline void expect_same_bits_under_adversarial_emulation(const Executable& exe,
                                                         const std::vector<HostTensor>& inputs) {
  auto plain = run_on_host(exe, inputs);
  ASSERT_TRUE(plain.ok()) << plain.message();
  AdversarialEmulation adversarial;
  auto shuffled = run_on_host(exe, inputs);
  ASSERT_TRUE(shuffled.ok()) << shuffled.message();
  for (size_t out = 0; out < plain.value().size(); ++out)
    EXPECT_EQ(plain.value()[out].bytes, shuffled.value()[out].bytes) << "output " << out;
}

}  // namespace dg
