// Mutation tests of the emulator (Note [GEMM mutants]): each known-bad variant of the GEMM main
// loop must be caught, by wrong numbers under some DYNGEN_EMU_* mode or by a launch error (a race
// report, a deadlock); the unmodified template, compiled the same way, must pass every mode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/device/dg_types.cuh"
#include "runtime/emu/device_headers.h"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/gemm_mutants.h"

namespace dg::emu::testing {
namespace {

// M and N just past a 32-tile edge, K = 6 x 32 + 8: seven k-tiles over three stages reuse each
// stage twice and end in a tail that is not a multiple of BK.
constexpr long long kM = 40, kN = 40, kK = 200;

// The sm_80 GEMM's headers in include order, as one text: each without its #pragma once and its
// includes of the others.
std::string gemm_template() {
  std::string text;
  for (const char* name : {"dg_gemm_tile_sm80.cuh", "dg_gemm_copy_sm80.cuh",
                           "dg_gemm_epilogue_sm80.cuh", "dg_gemm_sm80.cuh"}) {
    bool found = false;
    for (const EmbeddedFile& f : device_headers()) {
      if (f.name != name) continue;
      found = true;
      std::istringstream lines{std::string(f.content)};
      for (std::string line; std::getline(lines, line);)
        if (line != "#pragma once" && line.rfind("#include \"dg_gemm_", 0) != 0)
          text += line + "\n";
    }
    if (!found) ADD_FAILURE() << name << " is not among the embedded device headers";
  }
  return text;
}

void replace_all(std::string* s, const std::string& from, const std::string& to) {
  for (size_t p = s->find(from); p != std::string::npos; p = s->find(from, p + to.size()))
    s->replace(p, from.size(), to);
}

// The template with `edits` applied, renamed (mu_gemm_*, MuGemmTile, MuSmemTile) so that it sits
// beside the real one that dg_device.cuh includes, plus a kernel over it. Empty on a bad anchor.
std::string mutant_source(const std::vector<MutantEdit>& edits, std::string* error) {
  std::string t = gemm_template();
  for (const MutantEdit& e : edits) {
    const size_t at = t.find(e.anchor);
    if (at == std::string::npos || t.find(e.anchor, at + 1) != std::string::npos) {
      *error = "anchor not found exactly once in the sm_80 GEMM headers:\n" + e.anchor;
      return "";
    }
    t.replace(at, e.anchor.size(), e.replacement);
  }
  replace_all(&t, "#pragma once\n", "");
  replace_all(&t, "dg_gemm_", "mu_gemm_");
  replace_all(&t, "DgGemm", "MuGemm");  // DgGemmTile, DgGemmTileCopy, ...
  replace_all(&t, "DgSmemTile", "MuSmemTile");
  return "#include \"dg_device.cuh\"\n" + t + R"cuda(
typedef MuGemmTile<32, 32, 32, 2, 1, 3> MuTile;
struct MuStore {
  float* c;
  long long n;
  DG_DEVICE void operator()(long long row, int col, float acc) const { c[row * n + col] = acc; }
};
// C [m][n] = A [m][k] * B^T, B stored [n][k].
extern "C" __global__ void __launch_bounds__(MuTile::kThreads)
    mutant_gemm(const dg_bf16* __restrict__ a, const dg_bf16* __restrict__ b,
                float* __restrict__ c, long long m, long long n, long long k) {
  const long long m0 = (long long)blockIdx.x * MuTile::BM, n0 = (long long)blockIdx.y * MuTile::BN;
  float acc[1][MuTile::MT][MuTile::NT][4] = {};
  const dg_bf16* const bs[1] = {b};
  mu_gemm_mainloop<MuTile, false, false, 1>(acc, a, k, bs, k, m0, m, n0, n, 0, k);
  mu_gemm_epilogue<MuTile, 1>(acc, m0, m, n0, n, MuStore{c, n});
}
DG_EMU_ENTRY(mutant_gemm)
)cuda";
}

struct Mode {
  const char* name;
  const char* sched;
  const char* async;
  int seed;
  bool racecheck;
};

const Mode kModes[] = {
    {"fifo/wait", "fifo", "wait", 0, false},
    {"fifo/issue", "fifo", "issue", 0, false},
    {"random/random s1", "random", "random", 1, false},
    {"random/random s2", "random", "random", 2, false},
    {"random/random s3", "random", "random", 3, false},
    {"random/wait s4", "random", "wait", 4, false},
    {"racecheck", "fifo", "wait", 0, true},
};

ScopedEnv mode_env(const Mode& m) {
  return ScopedEnv({{"DYNGEN_EMU_SCHED", m.sched},
                    {"DYNGEN_EMU_ASYNC", m.async},
                    {"DYNGEN_EMU_SEED", std::to_string(m.seed)},
                    {"DYNGEN_EMU_RACECHECK", m.racecheck ? "1" : "0"}});
}

struct Outcome {
  std::string error;    // the launch's error, "" if it ran
  long long wrong = 0;  // elements of C outside the tolerance (NaN included)
};

// unaligned: A and B start one element (2 bytes) past a 16-byte boundary.
Outcome run_gemm(const EmuModule& module, const Mode& mode, bool unaligned = false) {
  std::vector<dg_bf16> abuf(kM * kK + 1), bbuf(kN * kK + 1);
  const size_t shift = unaligned ? 1 : 0;
  dg_bf16* const a = abuf.data() + shift;
  dg_bf16* const b = bbuf.data() + shift;
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f * 2.0f - 1.0f;
  };
  for (long long i = 0; i < kM * kK; ++i) a[i] = dg_float_to_bf16(next());
  for (long long i = 0; i < kN * kK; ++i) b[i] = dg_float_to_bf16(next());
  std::vector<float> c(kM * kN, 777.0f);
  const dg_bf16* pa = a;
  const dg_bf16* pb = b;
  float* pc = c.data();
  long long m = kM, n = kN, k = kK;
  const DgEmuLaunch cfg{(kM + 31) / 32, (kN + 31) / 32, 1, 64, 1, 1, 0};
  Outcome out;
  {
    const ScopedEnv scoped = mode_env(mode);
    out.error = launch(module, "mutant_gemm", cfg, pa, pb, pc, m, n, k);
  }
  if (!out.error.empty()) return out;
  for (long long i = 0; i < kM; ++i) {
    for (long long j = 0; j < kN; ++j) {
      double ref = 0.0;
      for (long long q = 0; q < kK; ++q)
        ref += double(dg_bf16_to_float(a[i * kK + q])) * dg_bf16_to_float(b[j * kK + q]);
      const float got = c[i * kN + j];
      if (!(std::fabs(got - ref) <= 1e-3)) ++out.wrong;
    }
  }
  return out;
}

std::string describe(const Outcome& o) {
  if (!o.error.empty()) return "error: " + o.error.substr(0, 300);
  return std::to_string(o.wrong) + " of " + std::to_string(kM * kN) + " wrong";
}

TEST(EmuMutation, TheUnmodifiedTemplatePassesEveryMode) {
  std::string error;
  const std::string source = mutant_source({}, &error);
  ASSERT_EQ(error, "");
  const EmuModule& module = test_module(source);
  for (const Mode& mode : kModes) {
    for (bool unaligned : {false, true}) {
      const Outcome o = run_gemm(module, mode, unaligned);
      EXPECT_EQ(o.error, "") << mode.name << (unaligned ? " unaligned" : "");
      EXPECT_EQ(o.wrong, 0) << mode.name << (unaligned ? " unaligned" : "");
    }
  }
}

TEST(EmuMutation, EveryMutantIsCaught) {
  for (const GemmMutant& mutant : gemm_mutants()) {
    std::string error;
    const std::string source = mutant_source(mutant.edits, &error);
    ASSERT_EQ(error, "") << mutant.name << " (update Note [GEMM mutants] with the template)";
    const EmuModule& module = test_module(source);
    bool caught = false;
    std::printf("mutant %s: %s\n", mutant.name.c_str(), mutant.bug.c_str());
    for (const Mode& mode : kModes) {
      const Outcome o = run_gemm(module, mode, mutant.unaligned);
      const bool hit = !o.error.empty() || o.wrong > 0;
      caught = caught || hit;
      std::printf("  %-17s %s%s\n", mode.name, hit ? "CAUGHT " : "passed ", describe(o).c_str());
    }
    EXPECT_TRUE(caught) << "mutant " << mutant.name << " passes every emulation mode";
  }
}

// The detector names both threads, what each did, and the address, whatever the schedule.
TEST(EmuMutation, RaceDetectorReportsThePrefetchBeforeTheBarrier) {
  std::string error;
  const std::string source = mutant_source(gemm_mutants()[0].edits, &error);
  ASSERT_EQ(error, "");
  const EmuModule& module = test_module(source);
  for (const char* sched : {"fifo", "random"}) {
    for (int seed : {0, 7}) {
      const Mode mode{"racecheck", sched, "random", seed, true};
      const Outcome o = run_gemm(module, mode);
      EXPECT_NE(o.error.find("mutant_gemm: shared-memory race in block ("), std::string::npos)
          << o.error;
      EXPECT_NE(o.error.find("read (ldmatrix)"), std::string::npos) << o.error;
      EXPECT_NE(o.error.find("wrote (cp.async)"), std::string::npos) << o.error;
      EXPECT_NE(o.error.find("static shared memory offset"), std::string::npos) << o.error;
      EXPECT_NE(o.error.find("DYNGEN_EMU_SEED=" + std::to_string(seed)), std::string::npos)
          << o.error;
      size_t threads = 0;
      for (size_t p = o.error.find("thread ("); p != std::string::npos;
           p = o.error.find("thread (", p + 1))
        ++threads;
      EXPECT_GE(threads, 2u) << o.error;
    }
  }
}

TEST(EmuMutation, AMissingAnchorIsAnError) {
  std::string error;
  EXPECT_EQ(mutant_source({{"no such line in the template\n", ""}}, &error), "");
  EXPECT_NE(error.find("anchor not found"), std::string::npos);
}

}  // namespace
}  // namespace dg::emu::testing
