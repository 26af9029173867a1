// The wgmma twin (codegen/device/dg_wgmma_sm90_emu.h, over the layout functions of
// dg_wgmma_sm90.cuh) against the PTX ISA, not against itself: the expected descriptor bits,
// swizzle permutations and accumulator positions below are transcribed from the ISA's Matrix
// Descriptor Format table, its K-major swizzling figures and its fragment figure for accumulator D
// of wgmma .m64nNk16 (section 9.7.15.5.1; Note [wgmma layouts]). The shared-memory images are laid
// out here from those tables, the results mapped back through them, and compared with a
// double-precision product. Then the asynchrony (Note [Deferred wgmma]) and, last, mutants of the
// twin, each of which these checks must catch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codegen/device/dg_types.cuh"
#include "codegen/device/dg_wgmma_sm90.cuh"
#include "runtime/emu/device_headers.h"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/wgmma_images.h"
#include "tests/emu/wgmma_kernels.h"

namespace dg::emu::testing {
namespace {

TEST(EmuWgmma, DescriptorFieldsFollowTheIsaTable) {
  // Start 0x1230 -> 0x123 in bits 0-13; LBO 0x40 -> 4 in bits 16-29; SBO 0x400 -> 0x40 in bits
  // 32-45; swizzle in bits 62-63 with 1 = 128B, 2 = 64B, 3 = 32B, 0 = none.
  EXPECT_EQ(dg_wgmma_desc(0x1230, 0x40, 0x400, kDgSwizzle128B), 0x4000004000040123ull);
  EXPECT_EQ(dg_wgmma_desc(0x1230, 0x40, 0x400, kDgSwizzle64B), 0x8000004000040123ull);
  EXPECT_EQ(dg_wgmma_desc(0x1230, 0x40, 0x400, kDgSwizzle32B), 0xc000004000040123ull);
  EXPECT_EQ(dg_wgmma_desc(0x1230, 0x40, 0x400, kDgSwizzleNone), 0x0000004000040123ull);
  // 14-bit fields: the largest shared-window address, 256 KiB - 16, fills bits 0-13.
  EXPECT_EQ(dg_wgmma_desc(0x3fff0, 0, 0, kDgSwizzleNone), 0x3fffull);
  const DgWgmmaDescFields f = dg_wgmma_desc_fields(0x8000004000040123ull | (5ull << 49));
  EXPECT_EQ(f.start, 0x1230u);
  EXPECT_EQ(f.lbo, 0x40u);
  EXPECT_EQ(f.sbo, 0x400u);
  EXPECT_EQ(f.base_offset, 5);
  EXPECT_EQ(f.swizzle, kDgSwizzle64B);
}

TEST(EmuWgmma, ChunkAddressesFollowTheIsaSwizzleFigures) {
  for (int swizzle : {kDgSwizzleNone, kDgSwizzle32B, kDgSwizzle64B, kDgSwizzle128B}) {
    const uint32_t base = 2048, lbo = 128, sbo = swizzle == kDgSwizzleNone ? 256 : 1024;
    const int steps = swizzle == kDgSwizzleNone ? 1 : atom_row_bytes(swizzle) / 32;
    for (int step = 0; step < steps; ++step) {  // k16 steps inside a swizzled row
      const dg_u64 desc =
          dg_wgmma_desc(base + 32u * static_cast<uint32_t>(step), lbo, sbo, swizzle);
      for (int r = 0; r < 24; ++r)
        for (int j = 0; j < 2; ++j)
          EXPECT_EQ(dg_wgmma_chunk_address(desc, r, j),
                    element_address(swizzle, base, lbo, sbo, r, 16 * step + 8 * j))
              << "swizzle " << swizzle << " step " << step << " row " << r << " chunk " << j;
    }
  }
}

// MN-major operands (imm-trans = 1): the twin's element addresses against the ISA's MN-major
// atoms (the same chunk permutation per 128-byte row, a row now being one K index).
TEST(EmuWgmma, MnMajorAddressesFollowTheIsaLayouts) {
  for (int swizzle : {kDgSwizzleNone, kDgSwizzle32B, kDgSwizzle64B, kDgSwizzle128B}) {
    const uint32_t base = 4096, lbo = swizzle == kDgSwizzleNone ? 128 : 2048,
                   sbo = swizzle == kDgSwizzleNone ? 512 : 1024;
    const dg_u64 desc = dg_wgmma_desc(base, lbo, sbo, swizzle);
    for (int i = 0; i < 136; ++i)
      for (int k = 0; k < 32; ++k)
        ASSERT_EQ(dg_wgmma_mn_element_address(desc, i, k),
                  mn_element_address(swizzle, base, lbo, sbo, i, k))
            << "swizzle " << swizzle << " i " << i << " k " << k;
  }
  // Spot entries of the 128-byte MN-major atom: K row 1 swaps chunks 0 and 1, row 3 reverses
  // each group of four, element 9 (chunk 1) of K row 0 is 18 bytes in; the next 64 elements
  // along N are one LBO further, the next 8 K rows one SBO.
  const dg_u64 d128 = dg_wgmma_desc(0, 8192, 1024, kDgSwizzle128B);
  EXPECT_EQ(dg_wgmma_mn_element_address(d128, 9, 0), 18u);
  EXPECT_EQ(dg_wgmma_mn_element_address(d128, 0, 1), 128u + 16u);
  EXPECT_EQ(dg_wgmma_mn_element_address(d128, 8, 1), 128u);
  EXPECT_EQ(dg_wgmma_mn_element_address(d128, 0, 3), 3u * 128 + 3u * 16);
  EXPECT_EQ(dg_wgmma_mn_element_address(d128, 64, 0), 8192u);
  EXPECT_EQ(dg_wgmma_mn_element_address(d128, 0, 8), 1024u);
}

TEST(EmuWgmma, AccumulatorPositionsFollowTheIsaFigure) {
  // Spot entries read off the figure: (thread, register) -> (row, column).
  struct Entry {
    int T, i, row, col;
  };
  for (const Entry& e :
       {Entry{0, 0, 0, 0}, Entry{0, 1, 0, 1}, Entry{0, 2, 8, 0}, Entry{0, 3, 8, 1},
        Entry{0, 4, 0, 8}, Entry{5, 0, 1, 2}, Entry{5, 2, 9, 2}, Entry{37, 0, 17, 2},
        Entry{37, 3, 25, 3}, Entry{127, 0, 55, 6}, Entry{127, 7, 63, 15}, Entry{64, 30, 40, 56}}) {
    EXPECT_EQ(dg_wgmma_acc_row(e.T, e.i), e.row) << e.T << " " << e.i;
    EXPECT_EQ(dg_wgmma_acc_col(e.T, e.i), e.col) << e.T << " " << e.i;
    EXPECT_EQ(acc_row(e.T, e.i), e.row);
    EXPECT_EQ(acc_col(e.T, e.i), e.col);
  }
  // Every element of a 64 x 256 tile is held exactly once.
  std::vector<int> seen(64 * 256, 0);
  for (int T = 0; T < 128; ++T)
    for (int i = 0; i < 128; ++i) ++seen[dg_wgmma_acc_row(T, i) * 256 + dg_wgmma_acc_col(T, i)];
  for (int v : seen) ASSERT_EQ(v, 1);
}

// C (64 x n) = A B^T (+ init mapped through the accumulator figure).
std::vector<double> reference(const Operands& o, const std::vector<float>* init) {
  std::vector<double> c(64u * o.n, 0.0);
  for (int r = 0; r < 64; ++r)
    for (int col = 0; col < o.n; ++col)
      for (int kk = 0; kk < o.k; ++kk)
        c[r * o.n + col] +=
            double(dg_bf16_to_float(o.a[r * o.k + kk])) * dg_bf16_to_float(o.b[col * o.k + kk]);
  if (init)
    for (int T = 0; T < 128; ++T)
      for (int i = 0; i < o.n / 2; ++i)
        c[acc_row(T, i) * o.n + acc_col(T, i)] += (*init)[T * (o.n / 2) + i];
  return c;
}

// Raw register dump -> the mismatches against `ref` through the ISA's accumulator figure.
int mismatches(const Operands& o, const std::vector<float>& dump, const std::vector<double>& ref,
               std::string* first) {
  int bad = 0;
  for (int T = 0; T < 128; ++T)
    for (int i = 0; i < o.n / 2; ++i) {
      const double want = ref[acc_row(T, i) * o.n + acc_col(T, i)];
      const float got = dump[T * (o.n / 2) + i];
      if (std::fabs(got - want) <= 1e-4) continue;
      if (bad++ == 0 && first)
        *first = "thread " + std::to_string(T) + " d[" + std::to_string(i) +
                 "] = " + std::to_string(got) + ", expected " + std::to_string(want);
    }
  return bad;
}

const EmuModule& wgmma_module() { return test_module(wgmma_kernels()); }

DgEmuLaunch one_warpgroup(const Operands& o) {
  return grid1d(1, 128, static_cast<unsigned>(o.image.size()));
}

// Runs wgmma_n<n> over `o`; returns the raw dump.
std::vector<float> run_one(const EmuModule& m, const Operands& o, bool accumulate,
                           const std::vector<float>& init, std::string* error) {
  std::vector<float> out(128u * (o.n / 2), -7.0f);
  const unsigned char* image = o.image.data();
  unsigned bytes = static_cast<unsigned>(o.image.size());
  unsigned long long da = o.da, db = o.db;
  const float* pinit = init.data();
  float* pout = out.data();
  int acc = accumulate ? 1 : 0;
  *error = launch(m, "wgmma_n" + std::to_string(o.n), one_warpgroup(o), image, bytes, da, db, pinit,
                  pout, acc);
  return out;
}

TEST(EmuWgmma, EverySwizzleModeMatchesTheProduct) {
  for (int n : {16, 32, 64, 128, 256}) {
    for (int swizzle : {kDgSwizzleNone, kDgSwizzle32B}) {  // k = 16: one 32-byte row
      SCOPED_TRACE("n " + std::to_string(n) + " swizzle " + std::to_string(swizzle));
      const Operands o = make_operands(n, 16, swizzle, 11u * n + swizzle);
      std::mt19937 rng(5);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> init(128u * (n / 2));
      for (float& x : init) x = dist(rng);
      for (bool accumulate : {false, true}) {
        std::string error, first;
        const std::vector<float> dump = run_one(wgmma_module(), o, accumulate, init, &error);
        ASSERT_EQ(error, "");
        EXPECT_EQ(mismatches(o, dump, reference(o, accumulate ? &init : nullptr), &first), 0)
            << first;
      }
    }
  }
}

// wgmma_steps_n16 over all of o's K (o.k / 16 steps, n = 16); returns the launch's error.
std::string run_steps(const EmuModule& m, const Operands& o, std::vector<float>* out) {
  const unsigned char* image = o.image.data();
  unsigned bytes = static_cast<unsigned>(o.image.size());
  unsigned long long da = o.da, db = o.db;
  int steps = o.k / 16;
  float* pout = out->data();
  return launch(m, "wgmma_steps_n16", one_warpgroup(o), image, bytes, da, db, steps, pout);
}

// A swizzled row holds S / 32 k16 steps (K = 16, 32, 64 for 32, 64, 128 bytes): chained wgmmas
// whose descriptors start 32 bytes further each step, the XOR applied after.
TEST(EmuWgmma, KStepsInsideSwizzledRowsMatchTheProduct) {
  for (int swizzle : {kDgSwizzle32B, kDgSwizzle64B, kDgSwizzle128B}) {
    SCOPED_TRACE("swizzle " + std::to_string(swizzle));
    const int k = atom_row_bytes(swizzle) / 2;
    const Operands o = make_operands(16, k, swizzle, 40u + swizzle);
    std::vector<float> out(128u * 8);
    ASSERT_EQ(run_steps(wgmma_module(), o, &out), "");
    std::string first;
    EXPECT_EQ(mismatches(o, out, reference(o, nullptr), &first), 0) << first;
  }
}

// wgmma_tb_n<n>: B MN-major over o's K in k16 steps; returns the launch's error.
std::string run_mn_major(const EmuModule& m, const Operands& o, std::vector<float>* out) {
  const unsigned char* image = o.image.data();
  unsigned bytes = static_cast<unsigned>(o.image.size());
  unsigned long long da = o.da, db = o.db;
  int steps = o.k / 16;
  unsigned b_step = o.b_step_bytes;
  float* pout = out->data();
  return launch(m, "wgmma_tb_n" + std::to_string(o.n), one_warpgroup(o), image, bytes, da, db,
                steps, b_step, pout);
}

TEST(EmuWgmma, MnMajorBMatchesTheProduct) {
  struct Case {
    int n, k, swizzle;
  };
  for (const Case& c :
       {Case{16, 16, kDgSwizzleNone}, Case{64, 16, kDgSwizzle32B}, Case{128, 32, kDgSwizzle64B},
        Case{64, 64, kDgSwizzle128B}, Case{128, 64, kDgSwizzle128B}}) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " swizzle " +
                 std::to_string(c.swizzle));
    const Operands o = make_operands(c.n, c.k, c.swizzle, 17u * c.n + c.swizzle, false, true);
    std::vector<float> out(128u * (c.n / 2));
    ASSERT_EQ(run_mn_major(wgmma_module(), o, &out), "");
    std::string first;
    EXPECT_EQ(mismatches(o, out, reference(o, nullptr), &first), 0) << first;
  }
}

// Launches `kernel` (image, bytes, da, db, out) over 16 x 16 operands; returns the error.
std::string run_probe(const EmuModule& m, const char* kernel, const Operands& o,
                      std::vector<float>* out) {
  const unsigned char* image = o.image.data();
  unsigned bytes = static_cast<unsigned>(o.image.size());
  unsigned long long da = o.da, db = o.db;
  float* pout = out->data();
  return launch(m, kernel, one_warpgroup(o), image, bytes, da, db, pout);
}

TEST(EmuWgmma, AccumulatorsAreUndefinedUntilRetired) {
  const Operands o = make_operands(16, 16, kDgSwizzleNone, 3);
  std::vector<float> out(128u * 8, 0.0f);
  ASSERT_EQ(run_probe(wgmma_module(), "wgmma_read_early", o, &out), "");
  for (float x : out) ASSERT_TRUE(std::isnan(x));
}

TEST(EmuWgmma, WaitGroupRetiresAllButTheNewestGroups) {
  const Operands o = make_operands(16, 16, kDgSwizzle32B, 4);
  std::vector<float> out(3u * 128 * 8, 0.0f);
  ASSERT_EQ(run_probe(wgmma_module(), "wgmma_two_groups", o, &out), "");
  const std::vector<double> ref = reference(o, nullptr);
  const std::vector<float> first(out.begin(), out.begin() + 1024),
      pending(out.begin() + 1024, out.begin() + 2048), last(out.begin() + 2048, out.end());
  std::string why;
  EXPECT_EQ(mismatches(o, first, ref, &why), 0) << why;
  for (float x : pending) ASSERT_TRUE(std::isnan(x)) << "wait_group 1 retired the newest group";
  EXPECT_EQ(mismatches(o, last, ref, &why), 0) << why;
}

TEST(EmuWgmma, OperandsAreReadAtRetirementOrAtIssue) {
  const Operands o = make_operands(16, 16, kDgSwizzleNone, 5);
  const std::vector<double> ref = reference(o, nullptr);
  std::string why;
  {
    const ScopedEnv mode({{std::string("DYNGEN_EMU_ASYNC"),
                           std::string("wait")}});  // zeroed before the wait: reads zeros
    std::vector<float> out(128u * 8, 1.0f);
    ASSERT_EQ(run_probe(wgmma_module(), "wgmma_overwrite_before_wait", o, &out), "");
    for (float x : out) ASSERT_EQ(x, 0.0f);
  }
  {
    const ScopedEnv mode(
        {{std::string("DYNGEN_EMU_ASYNC"), std::string("issue")}});  // read at issue: the product
    std::vector<float> out(128u * 8, 1.0f);
    ASSERT_EQ(run_probe(wgmma_module(), "wgmma_overwrite_before_wait", o, &out), "");
    EXPECT_EQ(mismatches(o, out, ref, &why), 0) << why;
  }
}

TEST(EmuWgmma, MisuseIsAnError) {
  const Operands o = make_operands(16, 16, kDgSwizzleNone, 6);
  std::vector<float> out(128u * 8);
  EXPECT_NE(run_probe(wgmma_module(), "wgmma_without_fence", o, &out).find("wgmma.fence"),
            std::string::npos);
  EXPECT_NE(run_probe(wgmma_module(), "wgmma_exit_in_flight", o, &out)
                .find("exited with a wgmma.mma_async not yet retired"),
            std::string::npos);
  // A block that is not whole warpgroups.
  const unsigned char* image = o.image.data();
  unsigned bytes = static_cast<unsigned>(o.image.size());
  unsigned long long da = o.da, db = o.db;
  float* pout = out.data();
  EXPECT_NE(launch(wgmma_module(), "wgmma_read_early",
                   grid1d(1, 96, static_cast<unsigned>(o.image.size())), image, bytes, da, db, pout)
                .find("whole warpgroups"),
            std::string::npos);
}

// Note [wgmma mutants]
// Each edit breaks one entry of the twin's layouts; the checks above, run
// on a module built from the edited header, must see wrong numbers.
struct TwinMutant {
  const char* name;
  const char* anchor;
  const char* replacement;
};

std::string embedded_file(const std::vector<EmbeddedFile>& files, const std::string& name) {
  for (const EmbeddedFile& f : files)
    if (std::string(f.name) == name) return std::string(f.content);
  ADD_FAILURE() << name << " is not among the embedded headers";
  return "";
}

// dg_wgmma_sm90.cuh with its host twin pasted where it includes it, each without its #pragma once:
// the layout functions and the twin as one text, for the mutants to edit.
std::string wgmma_header() {
  std::string header = embedded_file(device_headers(), "dg_wgmma_sm90.cuh");
  std::string twin = embedded_file(emu_headers(), "dg_wgmma_sm90_emu.h");
  const std::string include = "#include \"dg_wgmma_sm90_emu.h\"";
  const size_t at = header.find(include);
  if (at == std::string::npos) {
    ADD_FAILURE() << "dg_wgmma_sm90.cuh does not include its twin";
    return header;
  }
  twin.replace(twin.find("#pragma once"), 12, "");
  header.replace(at, include.size(), twin);
  header.replace(header.find("#pragma once"), 12, "");
  return header;
}

TEST(EmuWgmma, BreakingOneEntryOfTheTwinFailsTheChecks) {
  // Note [wgmma mutants].
  const TwinMutant mutants[] = {
      {"accumulator rows", "8 * ((i % 4) / 2)", "8 * (i % 2)"},
      {"accumulator columns", "2 * (T % 4) + i % 2", "2 * (T % 4) + (i / 2) % 2"},
      {"128-byte swizzle bits", "swizzle == kDgSwizzle128B ? 7u", "swizzle == kDgSwizzle128B ? 3u"},
      {"64-byte swizzle bits", "swizzle == kDgSwizzle64B ? 3u", "swizzle == kDgSwizzle64B ? 1u"},
      {"32-byte swizzle row", ": swizzle == kDgSwizzle32B ? 32", ": swizzle == kDgSwizzle32B ? 16"},
      {"leading byte offset", "static_cast<dg_u32>(j) * f.lbo", "static_cast<dg_u32>(j) * 16u"},
      {"stride byte offset", "static_cast<dg_u32>(r / 8) * f.sbo",
       "static_cast<dg_u32>(r / 8) * 128u"},
      {"MN-major leading byte offset", "(c / per_row) * f.lbo", "(c / per_row) * 128u"},
      {"MN-major stride byte offset", "kg * f.sbo,", "kg * 2048u,"},
      {"MN-major core matrices", "c * f.sbo + kg * f.lbo", "c * f.lbo + kg * f.sbo"},
      {"MN-major chunk in the row", "(c % per_row) * 16u", "(c % 2u) * 16u"},
      {"imm-trans-b ignored", "op.b_mn_major = (lanes[0].in[4] & 2u) != 0;",
       "op.b_mn_major = false;"},
  };
  const std::string header = wgmma_header();
  for (const TwinMutant& mu : mutants) {
    SCOPED_TRACE(mu.name);
    std::string text = header;
    const size_t at = text.find(mu.anchor);
    ASSERT_NE(at, std::string::npos) << mu.anchor;
    ASSERT_EQ(text.find(mu.anchor, at + 1), std::string::npos) << mu.anchor;
    text.replace(at, std::string(mu.anchor).size(), mu.replacement);
    const EmuModule& m =
        test_module("#include \"dg_device.cuh\"\n" + text + "\n" + kWgmmaKernelBody);
    int caught = 0;
    for (int swizzle : {kDgSwizzleNone, kDgSwizzle32B, kDgSwizzle64B, kDgSwizzle128B}) {
      const int k = atom_row_bytes(swizzle) == 16 ? 16 : atom_row_bytes(swizzle) / 2;
      const Operands o = make_operands(16, k, swizzle, 70u + swizzle);
      std::vector<float> out(128u * 8);
      const std::string error = run_steps(m, o, &out);
      caught += !error.empty() || mismatches(o, out, reference(o, nullptr), nullptr) > 0;
      // B MN-major at n = 128: two atoms along N for every swizzle.
      const Operands t = make_operands(128, k, swizzle, 90u + swizzle, false, true);
      std::vector<float> out_t(128u * 64);
      const std::string error_t = run_mn_major(m, t, &out_t);
      caught += !error_t.empty() || mismatches(t, out_t, reference(t, nullptr), nullptr) > 0;
    }
    EXPECT_GT(caught, 0) << "the mutant passed every check";
  }
}

}  // namespace
}  // namespace dg::emu::testing
