// The TMA twin (codegen/device/dg_tma_sm90_emu.h, Note [TMA box copies]): the tensor map's rules
// as the CUDA driver documents them for cuTensorMapEncodeTiled, boxes over the tensor's edges
// filled with zeros, the bytes landing only when the barrier is waited for, a 128-byte-swizzled box
// laid out as the PTX ISA's swizzle atoms, and swizzled boxes feeding wgmma.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "codegen/device/dg_tma_sm90.cuh"
#include "codegen/device/dg_types.cuh"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/isa_swizzle_tables.h"
#include "tests/emu/tma_kernels.h"

namespace dg::emu::testing {
namespace {

const EmuModule& tma_module() { return test_module(kTmaKernels); }

TEST(EmuTma, EncodingChecksTheDriverRules) {
  alignas(16) static unsigned char data[4096];
  const dg_u64 dims[2] = {40, 37};
  const dg_u32 box[2] = {16, 8}, ones[2] = {1, 1};
  const dg_u64 stride = 80;
  EXPECT_EQ(dg_tensor_map_check(2, 2, data, dims, &stride, box, ones, kDgSwizzleNone), nullptr);
  auto rule = [&](int rank, int elem, const void* p, dg_u64 d0, dg_u64 s, dg_u32 b0, dg_u32 b1,
                  dg_u32 e0, int swizzle) {
    const dg_u64 d[2] = {d0, 37};
    const dg_u32 bx[2] = {b0, b1}, es[2] = {e0, 1};
    const char* e = dg_tensor_map_check(rank, elem, p, d, &s, bx, es, swizzle);
    return std::string(e ? e : "");
  };
  EXPECT_NE(rule(3, 2, data, 40, 80, 16, 8, 1, 0).find("2-D"), std::string::npos);
  EXPECT_NE(rule(2, 3, data, 40, 80, 16, 8, 1, 0).find("element size"), std::string::npos);
  EXPECT_NE(rule(2, 2, data + 2, 40, 80, 16, 8, 1, 0).find("16-byte aligned"), std::string::npos);
  EXPECT_NE(rule(2, 2, data, 0, 80, 16, 8, 1, 0).find("globalDim"), std::string::npos);
  EXPECT_NE(rule(2, 2, data, 40, 88, 16, 8, 1, 0).find("multiples of 16"), std::string::npos);
  EXPECT_NE(rule(2, 2, data, 40, 64, 16, 8, 1, 0).find("cover a row"), std::string::npos);
  EXPECT_NE(rule(2, 2, data, 40, 80, 257, 8, 1, 0).find("boxDim must be in"), std::string::npos);
  EXPECT_NE(rule(2, 2, data, 40, 80, 12, 8, 1, 0).find("multiple of 16 bytes"), std::string::npos);
  EXPECT_NE(rule(2, 2, data, 40, 80, 16, 8, 2, 0).find("elementStrides"), std::string::npos);
  EXPECT_NE(rule(2, 2, data, 40, 80, 32, 8, 1, kDgSwizzle32B).find("span"), std::string::npos);
  EXPECT_EQ(rule(2, 2, data, 40, 80, 16, 8, 1, kDgSwizzle32B), "");
}

std::vector<dg_bf16> tensor(int rows, int cols, uint32_t seed) {
  return random_bf16(rows * cols, seed);
}

struct BoxRun {
  std::vector<unsigned char> early, out;
  std::string error;
};

BoxRun run_box(const DgTensorMap& map, int x, int y, unsigned offset, unsigned box_bytes,
               unsigned smem) {
  BoxRun r;
  r.early.assign(box_bytes, 0);
  r.out.assign(box_bytes, 0);
  DgTensorMap m = map;
  unsigned char* pe = r.early.data();
  unsigned char* po = r.out.data();
  r.error =
      launch(tma_module(), "tma_box", grid1d(1, 32, smem), m, x, y, offset, box_bytes, pe, po);
  return r;
}

TEST(EmuTma, BoxesOverTheEdgesAreFilledWithZeros) {
  const int rows = 37, cols = 40;
  const std::vector<dg_bf16> t = tensor(rows, cols, 1);
  DgTensorMap map;
  ASSERT_EQ(dg_tensor_map_encode(&map, 2, t.data(), {40, 37}, 80, {16, 8}, kDgSwizzleNone),
            nullptr);
  for (const auto& [x, y] :
       std::vector<std::pair<int, int>>{{0, 0}, {32, 32}, {-8, -3}, {48, 40}, {24, 30}}) {
    SCOPED_TRACE(std::to_string(x) + "," + std::to_string(y));
    const BoxRun r = run_box(map, x, y, 128, 16 * 8 * 2, 1024);
    ASSERT_EQ(r.error, "");
    for (int j = 0; j < 8; ++j)
      for (int i = 0; i < 16; ++i) {
        dg_u16 want = 0;
        if (x + i >= 0 && x + i < cols && y + j >= 0 && y + j < rows)
          std::memcpy(&want, &t[(y + j) * cols + x + i], 2);
        dg_u16 got;
        std::memcpy(&got, &r.out[(j * 16 + i) * 2], 2);
        ASSERT_EQ(got, want) << "box element (" << i << ", " << j << ")";
      }
  }
}

TEST(EmuTma, BytesLandWhenTheBarrierIsWaitedFor) {
  const std::vector<dg_bf16> t = tensor(8, 16, 2);
  DgTensorMap map;
  ASSERT_EQ(dg_tensor_map_encode(&map, 2, t.data(), {16, 8}, 32, {16, 8}, kDgSwizzleNone), nullptr);
  BoxRun deferred, at_issue;
  {
    const ScopedEnv mode({{std::string("DYNGEN_EMU_ASYNC"), std::string("wait")}});
    deferred = run_box(map, 0, 0, 0, 256, 256);
  }
  {
    const ScopedEnv mode({{std::string("DYNGEN_EMU_ASYNC"), std::string("issue")}});
    at_issue = run_box(map, 0, 0, 0, 256, 256);
  }
  ASSERT_EQ(deferred.error, "");
  ASSERT_EQ(at_issue.error, "");
  for (unsigned char c : deferred.early) ASSERT_EQ(c, 0xff) << "read before the wait: poison";
  EXPECT_EQ(at_issue.early, at_issue.out);
  EXPECT_EQ(deferred.out, at_issue.out);
  EXPECT_EQ(std::memcmp(deferred.out.data(), t.data(), 256), 0);
}

TEST(EmuTma, SwizzledBoxIsLaidOutAsTheIsaAtoms) {
  const int rows = 16, cols = 64;  // two 8-row atoms of 128-byte rows
  const std::vector<dg_bf16> t = tensor(rows, cols, 3);
  DgTensorMap map;
  ASSERT_EQ(dg_tensor_map_encode(&map, 2, t.data(), {64, 16}, 128, {64, 16}, kDgSwizzle128B),
            nullptr);
  const BoxRun r = run_box(map, 0, 0, 1024, rows * cols * 2, 4096);
  ASSERT_EQ(r.error, "");
  for (int row = 0; row < rows; ++row)
    for (int c = 0; c < 8; ++c)  // 16-byte chunk c of the row at the figure's physical chunk
      ASSERT_EQ(
          std::memcmp(&r.out[row * 128 + 16 * kSwizzle128[row % 8][c]], &t[row * cols + 8 * c], 16),
          0)
          << "row " << row << " chunk " << c;
  // A destination off a 1024-byte boundary is refused for the 128-byte swizzle.
  EXPECT_NE(run_box(map, 0, 0, 128, rows * cols * 2, 4096).error.find("1024"), std::string::npos);
}

TEST(EmuTma, SwizzledBoxesFeedWgmma) {
  const std::vector<dg_bf16> a = tensor(64, 64, 4), b = tensor(16, 64, 5);
  DgTensorMap am, bm;
  ASSERT_EQ(dg_tensor_map_encode(&am, 2, a.data(), {64, 64}, 128, {64, 64}, kDgSwizzle128B),
            nullptr);
  ASSERT_EQ(dg_tensor_map_encode(&bm, 2, b.data(), {64, 16}, 128, {64, 16}, kDgSwizzle128B),
            nullptr);
  std::vector<float> out(128 * 8);
  float* po = out.data();
  ASSERT_EQ(launch(tma_module(), "tma_then_wgmma", grid1d(1, 128, 8192 + 2048), am, bm, po), "");
  for (int T = 0; T < 128; ++T)
    for (int i = 0; i < 8; ++i) {
      const int row = dg_wgmma_acc_row(T, i), col = dg_wgmma_acc_col(T, i);
      double want = 0;
      for (int k = 0; k < 64; ++k)
        want += double(dg_bf16_to_float(a[row * 64 + k])) * dg_bf16_to_float(b[col * 64 + k]);
      ASSERT_NEAR(out[T * 8 + i], want, 1e-4) << "thread " << T << " d[" << i << "]";
    }
}

TEST(EmuTma, ACopyNobodyWaitsForIsAnError) {
  const std::vector<dg_bf16> t = tensor(1, 8, 6);
  DgTensorMap map;
  ASSERT_EQ(dg_tensor_map_encode(&map, 2, t.data(), {8, 1}, 16, {8, 1}, kDgSwizzleNone), nullptr);
  const ScopedEnv mode({{std::string("DYNGEN_EMU_ASYNC"), std::string("wait")}});
  const std::string error = launch(tma_module(), "tma_never_waited", grid1d(1, 1, 128), map);
  EXPECT_NE(error.find("no thread waited on"), std::string::npos) << error;
}

}  // namespace
}  // namespace dg::emu::testing
