// Device debug mode under the emulation (Note [Device debug mode] in codegen/device/dg_debug.cuh):
// a wrong mbarrier parity in the sm_90a main loop traps with a message naming the wait, where
// the normal build reports the deadlock as before; a wait that other threads keep busy traps at the
// poll bound; misplaced dynamic shared memory traps. And the async proxy (Note [Async proxy] in
// runtime/emu/dg_emu_proxy.h): wgmma operands stored without fence.proxy.async are caught.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "codegen/device/dg_gemm_sm90.cuh"
#include "codegen/device/dg_tma_sm90.cuh"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/wait_mutants.h"
#include "tests/emu/wgmma_images.h"
#include "tests/emu/wgmma_kernels.h"

namespace dg::emu::testing {
namespace {

std::vector<std::string> debug_flags(std::vector<std::string> extra = {}) {
  std::vector<std::string> flags = kStrictFlags;
  flags.push_back("-DDG_DEVICE_DEBUG=1");
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

std::string expect_contains(const std::string& text, const std::vector<std::string>& parts) {
  std::string missing;
  for (const std::string& p : parts)
    if (text.find(p) == std::string::npos) missing += "'" + p + "' ";
  return missing;
}

// The 128 x 64 x 3 kernel of kWgmmaGemmKernels on an M x 128 x 200 product; returns the launch's
// error and fills c.
std::string run_gemm(const EmuModule& module, long long M, std::vector<float>* c) {
  constexpr long long N = 128, K = 200;
  const std::vector<dg_bf16> a = random_bf16(M * K, 11), b = random_bf16(N * K, 12);
  DgTensorMap am, bm;
  EXPECT_EQ(dg_tensor_map_encode(&am, 2, a.data(), {K, static_cast<dg_u64>(M)}, 2 * K, {64, 128},
                                 kDgSwizzle128B),
            nullptr);
  EXPECT_EQ(dg_tensor_map_encode(&bm, 2, b.data(), {K, N}, 2 * K, {64, 64}, kDgSwizzle128B),
            nullptr);
  c->assign(M * N, 0.0f);
  float* pc = c->data();
  long long m = M, n = N, k = K;
  typedef DgWgmmaTile<128, 64, 3> Tile;
  const DgEmuLaunch cfg{
      static_cast<unsigned>((M + 127) / 128), 2, 1, Tile::kThreads, 1, 1, Tile::kSmemBytes};
  static_assert(Tile::kStage == static_cast<int>(kGemmStageBytes));
  return launch(module, "wgmma_gemm_128x64x3", cfg, am, bm, pc, m, n, k);
}

TEST(EmuDeviceDebug, WrongParityTrapsNamingTheWait) {
  const std::string source = wgmma_gemm_with_producer_parity(kWrongProducerParity);
  ASSERT_FALSE(source.empty()) << "the producer's parity is not in dg_gemm_sm90.cuh once";
  std::vector<float> c;
  // Without the debug build: the deadlock report, as before the debug mode existed.
  const std::string plain = run_gemm(test_module(source), 64, &c);
  EXPECT_EQ(expect_contains(plain, {"wgmma_gemm_128x64x3: ", "never completes"}), "") << plain;
  EXPECT_EQ(plain.find("device debug"), std::string::npos) << plain;
  // With it: the trap's message, after the kernel's name, naming the wait, its barrier's shared
  // address and parity, the block and the thread.
  const std::string debug = run_gemm(test_module(source, debug_flags()), 64, &c);
  EXPECT_EQ(
      expect_contains(debug, {"wgmma_gemm_128x64x3: dyngen device debug: mbarrier wait '",
                              "parity 0) not complete after", "block (0,", ") thread (", ": trap"}),
      "")
      << debug;
  const bool full = debug.find("wait 'full' (shared address " +
                               std::to_string(kFullBarrierAddress) + ",") != std::string::npos;
  const bool empty = debug.find("wait 'empty' (shared address " +
                                std::to_string(kEmptyBarrierAddress) + ",") != std::string::npos;
  EXPECT_TRUE(full || empty) << debug;
}

TEST(EmuDeviceDebug, TheRightParityRunsTheSameUnderDebug) {
  const std::string source = wgmma_gemm_with_producer_parity(kRightProducerParity);
  ASSERT_FALSE(source.empty());
  std::vector<float> plain, debug;
  ASSERT_EQ(run_gemm(test_module(source), 200, &plain), "");
  ASSERT_EQ(run_gemm(test_module(source, debug_flags()), 200, &debug), "");
  EXPECT_EQ(plain, debug);
}

// Thread 0 waits on a barrier that never completes while threads 1 and 2 hand a second and a
// third barrier back and forth `rounds` times: barriers keep changing, so no deadlock is in
// sight, and only the poll bound ends the wait.
constexpr const char* kBusyWaitKernel = R"cuda(
#include "dg_device.cuh"
#include "dg_mbarrier_sm90.cuh"

extern "C" __global__ void wait_while_others_work(int rounds, int* out) {
  __shared__ __align__(8) dg_u64 never, ping, pong;
  if (threadIdx.x == 0) {
    dg_mbarrier_init(&never, 2);
    dg_mbarrier_init(&ping, 1);
    dg_mbarrier_init(&pong, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    dg_mbarrier_wait_parity(&never, 0, "never");
    out[0] = 1;
  } else if (threadIdx.x == 1 || threadIdx.x == 2) {
    dg_u64* mine = threadIdx.x == 1 ? &ping : &pong;
    dg_u64* theirs = threadIdx.x == 1 ? &pong : &ping;
    for (int i = 0; i < rounds; ++i) {
      if (threadIdx.x == 1) dg_mbarrier_arrive(theirs);
      dg_mbarrier_wait_parity(mine, static_cast<unsigned>(i) & 1u, "ping-pong");
      if (threadIdx.x == 2) dg_mbarrier_arrive(theirs);
    }
  }
}
DG_EMU_ENTRY(wait_while_others_work)
)cuda";

TEST(EmuDeviceDebug, TheWaitTrapsAtThePollBound) {
  const EmuModule& m = test_module(kBusyWaitKernel, debug_flags({"-DDG_DEVICE_DEBUG_POLLS=1000"}));
  int rounds = 1 << 20, out = 0;
  int* po = &out;
  const std::string error = launch(m, "wait_while_others_work", grid1d(1, 32), rounds, po);
  EXPECT_EQ(expect_contains(error, {"wait_while_others_work: dyngen device debug: mbarrier wait "
                                    "'never' (shared address ",
                                    "parity 0) not complete after 1000 polls",
                                    "block (0,0,0) thread (0,0,0): trap"}),
            "")
      << error;
  EXPECT_EQ(out, 0);
}

// Note [Emulated shared window]: dynamic shared memory off a 1024-byte boundary breaks the
// 128-byte swizzle the TMA boxes and the wgmma descriptors assume. The debug build's check
// names it before any copy; the normal build is stopped by the TMA twin's own rule; at a 1024-byte
// offset both compute the product.
TEST(EmuDeviceDebug, MisalignedDynamicSharedMemoryTraps) {
  const std::string source = wgmma_gemm_with_producer_parity(kRightProducerParity);
  ASSERT_FALSE(source.empty());
  std::vector<float> reference, c;
  ASSERT_EQ(run_gemm(test_module(source), 130, &reference), "");
  {
    const ScopedEnv offset({{std::string("DYNGEN_EMU_SMEM_OFFSET"), std::string("512")}});
    const std::string debug = run_gemm(test_module(source, debug_flags()), 130, &c);
    EXPECT_EQ(expect_contains(debug, {"wgmma_gemm_128x64x3: dyngen device debug: dynamic shared "
                                      "memory starts at shared address 512, not on the 1024-byte "
                                      "boundary",
                                      ": trap", "DYNGEN_EMU_SMEM_OFFSET=512"}),
              "")
        << debug;
    const std::string plain = run_gemm(test_module(source), 130, &c);
    EXPECT_NE(plain.find("a TMA destination must be 128-byte aligned (1024 with a 128-byte"),
              std::string::npos)
        << plain;
  }
  const ScopedEnv offset({{std::string("DYNGEN_EMU_SMEM_OFFSET"), std::string("2048")}});
  for (bool debug : {false, true}) {
    ASSERT_EQ(run_gemm(test_module(source, debug ? debug_flags() : kStrictFlags), 130, &c), "");
    EXPECT_EQ(c, reference) << "debug " << debug;
  }
}

// The wgmma test kernels store their operands with ordinary stores and fence them (load_image in
// wgmma_kernels.h). Note [Async proxy]: without the fence, the async proxy's reads are caught.
TEST(EmuAsyncProxy, OperandsStoredWithoutTheFenceAreCaught) {
  const std::string fence = "  dg_fence_proxy_async();\n  __syncthreads();\n}";
  std::string body = kWgmmaKernelBody;
  const size_t at = body.find(fence);  // load_image's fence
  ASSERT_NE(at, std::string::npos);
  const std::string mutant = std::string(body).replace(at, fence.size(), "  __syncthreads();\n}");
  const std::string head = "#include \"dg_device.cuh\"\n#include \"dg_wgmma_sm90.cuh\"\n";
  const Operands o = make_operands(16, 16, kDgSwizzle128B, 5);
  for (const char* async : {"wait", "issue"}) {
    SCOPED_TRACE(async);
    const ScopedEnv mode({{std::string("DYNGEN_EMU_ASYNC"), std::string(async)}});
    for (bool fenced : {true, false}) {
      const EmuModule& m = test_module(head + (fenced ? body : mutant));
      const unsigned char* image = o.image.data();
      unsigned bytes = static_cast<unsigned>(o.image.size());
      unsigned long long da = o.da, db = o.db;
      std::vector<float> init(128 * 8, 0.0f), out(128 * 8, -1.0f);
      const float* pi = init.data();
      float* pout = out.data();
      int accumulate = 0;
      const std::string error = launch(m, "wgmma_n16", DgEmuLaunch{1, 1, 1, 128, 1, 1, bytes},
                                       image, bytes, da, db, pi, pout, accumulate);
      if (fenced) {
        EXPECT_EQ(error, "");
      } else {
        EXPECT_EQ(expect_contains(error, {"wgmma_n16: ",
                                          "a wgmma operand reads dynamic shared "
                                          "memory at offset ",
                                          "no fence.proxy.async"}),
                  "")
            << error;
      }
    }
  }
}

}  // namespace
}  // namespace dg::emu::testing
