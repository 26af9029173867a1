// Note [GPU probes]
// Every primitive with an emulation twin runs on the device and under the
// emulation on the same inputs, and the two results must agree bit for bit: ldmatrix and
// mma.sync, bf16 conversion, wgmma (its accumulator layout and swizzled operands) and the TMA box
// (its edges and its swizzle). Where sums are involved the inputs are small integers, so every
// sum is exact in f32 and the hardware's order of additions cannot change a bit. A mismatch means
// the twin, and with it every emulated test, is wrong about the hardware. Skipped without a GPU;
// the wgmma and TMA probes need an sm_90a device. bench/gpu/run_h200.sh runs them first.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codegen/device/dg_tma_sm90.cuh"
#include "runtime/compiler.h"
#include "runtime/cuda_driver.h"
#include "runtime/emu/device_headers.h"
#include "runtime/kernel_module.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/emu/tensor_core_kernels.h"
#include "tests/emu/tma_kernels.h"
#include "tests/emu/wgmma_images.h"
#include "tests/emu/wgmma_kernels.h"
#include "tests/gpu/device_run.h"

namespace dg {
namespace {

using emu::testing::grid1d;
using emu::testing::launch;
using emu::testing::Operands;
using emu::testing::test_module;

#define DG_PROBE_SKIP_UNLESS(needs_sm90a)                                                       \
  do {                                                                                          \
    std::string why;                                                                            \
    if (!gpu_usable(&why)) GTEST_SKIP() << "no usable GPU: " << why;                            \
    if ((needs_sm90a) && CudaDriver::instance().default_arch(0) != "sm_90a")                    \
      GTEST_SKIP() << "needs an sm_90a device, not " << CudaDriver::instance().default_arch(0); \
  } while (0)

// `source` compiled for device 0's arch and loaded there, with `kernels` resolved in order.
std::unique_ptr<KernelModule> gpu_module(const std::string& source,
                                         const std::vector<std::string>& kernels) {
  std::vector<CudaHeader> headers;
  for (const EmbeddedFile& f : device_headers())
    headers.push_back({std::string(f.name), std::string(f.content)});
  auto compiled = nvrtc_compile(source, headers,
                                device_compile_options(CudaDriver::instance().default_arch(0)));
  EXPECT_TRUE(compiled.ok()) << compiled.message();
  if (!compiled.ok()) return nullptr;
  auto module = load_cuda_module(compiled->binary, 0);
  EXPECT_TRUE(module.ok()) << module.message();
  if (!module.ok()) return nullptr;
  Status s = module.value()->resolve(kernels);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? std::move(module).value() : nullptr;
}

// Launches kernel `k` of `m` on device 0 with each argument passed by address.
template <typename... A>
std::string gpu_launch(const KernelModule& m, size_t k, unsigned blocks, int threads, int smem,
                       A&... args) {
  void* ptrs[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
  Status s = m.launch(k, 0, {blocks, 1, 1}, {threads, 1, 1}, smem, ptrs, nullptr);
  return s.ok() ? "" : s.message();
}

template <typename T>
unsigned long long upload(DeviceArena& arena, const std::vector<T>& v) {
  auto p = arena.upload(v.data(), v.size() * sizeof(T));
  EXPECT_TRUE(p.ok()) << p.message();
  return p.ok() ? p.value() : 0;
}

template <typename T>
std::vector<T> download(const DeviceArena& arena, unsigned long long p, size_t n) {
  std::vector<T> v(n);
  Status s = arena.download(v.data(), p, n * sizeof(T));
  EXPECT_TRUE(s.ok()) << s.message();
  return v;
}

TEST(GpuProbe, LdmatrixMmaAndBf16MatchTheTwinBitwise) {
  DG_PROBE_SKIP_UNLESS(false);
  const std::string source = emu::testing::kTensorCoreKernels;
  auto gpu = gpu_module(source, {"ldmatrix_probe", "gemm_nk", "bf16_convert"});
  ASSERT_TRUE(gpu);
  const emu::EmuModule& host = test_module(source);
  DeviceArena arena;
  {  // ldmatrix: 32 lanes x 8 registers (plain and transposed)
    std::vector<unsigned> want(32 * 8);
    unsigned* pw = want.data();
    ASSERT_EQ(launch(host, "ldmatrix_probe", grid1d(1, 32), pw), "");
    unsigned long long out = arena.alloc(want.size() * 4).value();
    ASSERT_EQ(gpu_launch(*gpu, 0, 1, 32, 0, out), "");
    EXPECT_EQ(download<unsigned>(arena, out, want.size()), want);
  }
  {  // mma.sync through gemm_nk: C[m][16] = A[m][32] W[16][32]^T, m = 37 (a ragged tile)
    long long m = 37;
    const auto a = emu::testing::small_integers_bf16(m * emu::testing::kGemmK, 1);
    const auto w = emu::testing::small_integers_bf16(16 * emu::testing::kGemmK, 2);
    std::vector<float> want(m * 16, 0.0f);
    const dg_bf16* pa = a.data();
    const dg_bf16* pw = w.data();
    float* pc = want.data();
    const unsigned blocks = static_cast<unsigned>((m + 15) / 16);
    ASSERT_EQ(launch(host, "gemm_nk", grid1d(blocks, 32), pa, pw, pc, m), "");
    unsigned long long da = upload(arena, a), dw = upload(arena, w);
    unsigned long long dc = upload(arena, std::vector<float>(m * 16, 0.0f));
    ASSERT_EQ(gpu_launch(*gpu, 1, blocks, 32, 0, da, dw, dc, m), "");
    EXPECT_EQ(download<float>(arena, dc, want.size()), want);
  }
  {  // bf16 conversion: rounding, NaN, infinities and subnormals, both directions
    std::vector<float> x = {0.0f,     -0.0f,  1.0f,    1.00390625f, 1.01171875f, -3.39e38f,
                            3.39e38f, 1e-40f, -1e-41f, 65504.0f,    0.1f,        -7.77f};
    x.push_back(std::numeric_limits<float>::infinity());
    x.push_back(std::numeric_limits<float>::quiet_NaN());
    while (x.size() < 32) x.push_back(static_cast<float>(x.size()) * 0.3337f);
    long long n = static_cast<long long>(x.size());
    std::vector<dg_bf16> y(n);
    std::vector<float> z(n);
    std::vector<unsigned> packed(n);
    const float* px = x.data();
    dg_bf16* py = y.data();
    float* pz = z.data();
    unsigned* pp = packed.data();
    ASSERT_EQ(launch(host, "bf16_convert", grid1d(1, 32), px, py, pz, pp, n), "");
    unsigned long long dx = upload(arena, x), dy = arena.alloc(n * 2).value(),
                       dz = arena.alloc(n * 4).value(), dp = arena.alloc(n * 4).value();
    ASSERT_EQ(gpu_launch(*gpu, 2, 1, 32, 0, dx, dy, dz, dp, n), "");
    const auto gy = download<dg_bf16>(arena, dy, n);
    EXPECT_EQ(std::memcmp(gy.data(), y.data(), n * 2), 0);
    EXPECT_EQ(std::memcmp(download<float>(arena, dz, n).data(), z.data(), n * 4), 0);
    EXPECT_EQ(download<unsigned>(arena, dp, n), packed);
  }
}

TEST(GpuProbe, WgmmaMatchesTheTwinBitwise) {
  DG_PROBE_SKIP_UNLESS(true);
  const std::string source = emu::testing::wgmma_kernels();
  auto gpu = gpu_module(source, {"wgmma_n64", "wgmma_steps_n16"});
  ASSERT_TRUE(gpu);
  const emu::EmuModule& host = test_module(source);
  DeviceArena arena;
  struct Case {
    int n, k, swizzle;
  };
  for (const Case& c : {Case{64, 16, kDgSwizzleNone}, Case{64, 16, kDgSwizzle32B},
                        Case{16, 32, kDgSwizzle64B}, Case{16, 64, kDgSwizzle128B}}) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " swizzle " + std::to_string(c.swizzle));
    const Operands o = emu::testing::make_operands(c.n, c.k, c.swizzle, 9u + c.swizzle, true);
    const unsigned smem = static_cast<unsigned>(o.image.size());
    unsigned bytes = smem;
    unsigned long long da = o.da, db = o.db;
    const size_t outs = 128u * (c.n / 2);
    std::vector<float> want(outs, -1.0f), init(outs, 0.0f);
    const unsigned char* pi = o.image.data();
    const float* pinit = init.data();
    float* pw = want.data();
    unsigned long long gi = upload(arena, o.image), ginit = upload(arena, init);
    unsigned long long gout = arena.alloc(outs * 4).value();
    int accumulate = 0, steps = c.k / 16;
    if (c.n == 64) {
      ASSERT_EQ(
          launch(host, "wgmma_n64", grid1d(1, 128, smem), pi, bytes, da, db, pinit, pw, accumulate),
          "");
      ASSERT_EQ(gpu_launch(*gpu, 0, 1, 128, smem, gi, bytes, da, db, ginit, gout, accumulate), "");
    } else {
      ASSERT_EQ(launch(host, "wgmma_steps_n16", grid1d(1, 128, smem), pi, bytes, da, db, steps, pw),
                "");
      ASSERT_EQ(gpu_launch(*gpu, 1, 1, 128, smem, gi, bytes, da, db, steps, gout), "");
    }
    const std::vector<float> got = download<float>(arena, gout, outs);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), outs * 4), 0)
        << "the device's accumulators differ from the twin's";
  }
}

// B MN-major (imm-trans-b = 1): the layout the backward's dgrad kernels read (Note [wgmma
// layouts]), two atoms along N.
TEST(GpuProbe, WgmmaMnMajorBMatchesTheTwinBitwise) {
  DG_PROBE_SKIP_UNLESS(true);
  const std::string source = emu::testing::wgmma_kernels();
  auto gpu = gpu_module(source, {"wgmma_tb_n128"});
  ASSERT_TRUE(gpu);
  const emu::EmuModule& host = test_module(source);
  DeviceArena arena;
  for (int swizzle : {kDgSwizzleNone, kDgSwizzle128B}) {
    SCOPED_TRACE("swizzle " + std::to_string(swizzle));
    const int k = swizzle == kDgSwizzleNone ? 16 : 64;
    const Operands o = emu::testing::make_operands(128, k, swizzle, 21u + swizzle, true, true);
    const unsigned smem = static_cast<unsigned>(o.image.size());
    unsigned bytes = smem, b_step = o.b_step_bytes;
    unsigned long long da = o.da, db = o.db;
    int steps = k / 16;
    const size_t outs = 128u * 64;
    std::vector<float> want(outs, -1.0f);
    const unsigned char* pi = o.image.data();
    float* pw = want.data();
    unsigned long long gi = upload(arena, o.image), gout = arena.alloc(outs * 4).value();
    ASSERT_EQ(
        launch(host, "wgmma_tb_n128", grid1d(1, 128, smem), pi, bytes, da, db, steps, b_step, pw),
        "");
    ASSERT_EQ(gpu_launch(*gpu, 0, 1, 128, smem, gi, bytes, da, db, steps, b_step, gout), "");
    const std::vector<float> got = download<float>(arena, gout, outs);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), outs * 4), 0)
        << "the device's accumulators differ from the twin's";
  }
}

TEST(GpuProbe, TmaBoxMatchesTheTwinBitwise) {
  DG_PROBE_SKIP_UNLESS(true);
  const auto encode = CudaDriver::instance().api().cuTensorMapEncodeTiled;
  ASSERT_NE(encode, nullptr) << "the driver lacks cuTensorMapEncodeTiled";
  const std::string source = emu::testing::kTmaKernels;
  auto gpu = gpu_module(source, {"tma_box"});
  ASSERT_TRUE(gpu);
  const emu::EmuModule& host = test_module(source);
  DeviceArena arena;
  const int rows = 37, cols = 64;
  const auto t = emu::testing::random_bf16(rows * cols, 5);
  const unsigned long long gt = upload(arena, t);
  struct Case {
    int x, y, swizzle;
    unsigned box0, box1;
  };
  for (const Case& c : {Case{32, 32, kDgSwizzleNone, 16, 8}, Case{-8, -3, kDgSwizzleNone, 16, 8},
                        Case{0, 24, kDgSwizzle128B, 64, 16}}) {
    SCOPED_TRACE(std::to_string(c.x) + "," + std::to_string(c.y));
    const dg_u64 dims[2] = {static_cast<dg_u64>(cols), static_cast<dg_u64>(rows)};
    const dg_u32 box[2] = {c.box0, c.box1};
    DgTensorMap host_map, gpu_map;
    ASSERT_EQ(dg_tensor_map_encode(&host_map, 2, t.data(), {dims[0], dims[1]}, cols * 2,
                                   {box[0], box[1]}, c.swizzle),
              nullptr);
    // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; CU_TENSOR_MAP_SWIZZLE_NONE or _128B.
    const unsigned long long strides[1] = {static_cast<unsigned long long>(cols) * 2};
    const unsigned ones[2] = {1, 1};
    ASSERT_EQ(encode(&gpu_map, 9, 2, reinterpret_cast<void*>(gt), dims, strides, box, ones, 0,
                     c.swizzle == kDgSwizzle128B ? 3 : 0, 0, 0),
              0);
    unsigned box_bytes = c.box0 * c.box1 * 2, offset = 1024, smem = 1024 + box_bytes;
    int x = c.x, y = c.y;
    std::vector<unsigned char> early(box_bytes), want(box_bytes);
    unsigned char* pe = early.data();
    unsigned char* pw = want.data();
    ASSERT_EQ(
        launch(host, "tma_box", grid1d(1, 32, smem), host_map, x, y, offset, box_bytes, pe, pw),
        "");
    unsigned long long ge = arena.alloc(box_bytes).value(), gw = arena.alloc(box_bytes).value();
    ASSERT_EQ(gpu_launch(*gpu, 0, 1, 32, static_cast<int>(smem), gpu_map, x, y, offset, box_bytes,
                         ge, gw),
              "");
    EXPECT_EQ(download<unsigned char>(arena, gw, box_bytes), want)
        << "the device's box differs from the twin's";
  }
}

}  // namespace
}  // namespace dg
