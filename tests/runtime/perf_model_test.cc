// The performance model's parts on inputs worked out by hand: the SASS reader's loops (Note [Loops
// in SASS]), occupancy against the CUDA guide's per-SM limits, the achievable estimate's waves and
// bounds (Note [Achievable estimate]) and the eager baseline's cuBLAS model (Note [Eager
// baseline]).
#include "runtime/model/perf_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/model/eager_baseline.h"
#include "runtime/model/occupancy.h"
#include "runtime/model/sass_stats.h"

namespace dg {
namespace {

// A listing in cuobjdump's layout: an outer k-loop (0x0040-0x0120) with 2 HMMA, a synchronous copy
// loop inside it (0x0060-0x0090) whose LDG feeds an STS, an epilogue loop (0x0140-0x0170) whose LDG
// is never read in the loop, and the branch to itself after EXIT.
constexpr const char* kListing = R"(
        /*0000*/                   S2R R0, SR_TID.X ;           /* 0x0000000000007919 */
                                                                /* 0x000e220000002100 */
        /*0010*/                   MOV R2, RZ ;                 /* 0x0000000000027802 */
        /*0020*/                   MOV R3, RZ ;                 /* 0x0000000000037802 */
        /*0030*/                   MOV R4, RZ ;                 /* 0x0000000000047802 */
        /*0040*/                   LDSM.16.M88.4 R8, [R2] ;     /* 0x000000000208783b */
        /*0050*/                   IADD3 R5, R5, 0x1, RZ ;      /* 0x0000000105057810 */
        /*0060*/                   LDG.E.128 R20, desc[UR4][R6.64] ; /* 0x0000000406147981 */
        /*0070*/                   STS.128 [R3], R20 ;          /* 0x0000001403007388 */
        /*0080*/                   ISETP.NE.AND P0, PT, R5, 0x4, PT ; /* 0x0000000405007c0c */
        /*0090*/               @P0 BRA 0x60 ;                   /* 0xfffffffc00f00947 */
        /*00a0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ; /* 0x0000000000007b1d */
        /*00b0*/                   HMMA.16816.F32.BF16 R12, R8, R10, R12 ; /* 0x0000000a080c723c */
        /*00c0*/                   HMMA.16816.F32.BF16 R16, R8, R11, R16 ; /* 0x0000000b0810723c */
        /*00d0*/                   IADD3 R2, R2, 0x20, RZ ;     /* 0x0000002002027810 */
        /*00e0*/                   IADD3 R4, R4, 0x1, RZ ;      /* 0x0000000104047810 */
        /*00f0*/                   ISETP.NE.AND P1, PT, R4, 0x40, PT ; /* 0x0000004004007c0c */
        /*0100*/                   NOP ;                        /* 0x0000000000007918 */
        /*0110*/                   NOP ;                        /* 0x0000000000007918 */
        /*0120*/               @P1 BRA 0x40 ;                   /* 0xffffff1000f01947 */
        /*0130*/                   MOV R30, RZ ;                /* 0x00000000001e7802 */
        /*0140*/                   LDG.E R24, desc[UR4][R26.64] ; /* 0x00000004181a7981 */
        /*0150*/                   FFMA R30, R12, R13, R30 ;    /* 0x0000000d0c1e7223 */
        /*0160*/                   ISETP.NE.AND P2, PT, R30, RZ, PT ; /* 0x000000ff1e007c0c */
        /*0170*/               @P2 BRA 0x140 ;                  /* 0xfffffffc00f02947 */
        /*0180*/                   EXIT ;                       /* 0x000000000000794d */
        /*0190*/                   BRA 0x190;                   /* 0xfffffffc00fc7947 */
)";

TEST(SassStats, FindsLoopsByTheirBackwardBranches) {
  SassStats s = analyze_sass(kListing);
  ASSERT_EQ(s.instructions.size(), 26u);
  EXPECT_EQ(s.mma, 2);
  EXPECT_EQ(s.ffma, 1);
  ASSERT_EQ(s.loops.size(), 3u);  // the branch to itself is not a loop
  const SassLoop& copy = s.loops[0];
  EXPECT_EQ(copy.instructions, 4);
  EXPECT_EQ(copy.global_loads, 1);
  EXPECT_EQ(copy.global_load_bytes, 16);
  EXPECT_TRUE(copy.exposed_staging_load);  // the STS reads R20..R23
  EXPECT_FALSE(copy.exposed_global_load);
  const SassLoop& main = s.loops[1];
  EXPECT_EQ(main.instructions, 15);
  EXPECT_EQ(main.mma, 2);
  EXPECT_EQ(main.mma_flops, 2 * 4096);
  EXPECT_EQ(main.inner_loops, 1);
  EXPECT_EQ(main.barriers, 1);
  EXPECT_TRUE(main.exposed_shared_load);  // the HMMAs read R8..R11
  EXPECT_EQ(s.main_mma_loop, 1);
  EXPECT_DOUBLE_EQ(s.instructions_per_m16n8k16(), 7.5);
  const SassLoop& epilogue = s.loops[2];
  EXPECT_EQ(epilogue.ffma, 1);
  EXPECT_FALSE(epilogue.exposed_global_load);  // R24 is not read in the loop
  EXPECT_FALSE(epilogue.exposed_staging_load);
  ASSERT_EQ(s.simt_loops.size(), 1u);
  EXPECT_EQ(s.simt_loops[0], 2);
}

TEST(SassStats, AsyncCopyLoopsHideTheirSynchronousFallback) {
  std::string listing = kListing;
  listing.replace(listing.find("STS.128 [R3], R20"), 17,
                  "LDGSTS.E.BYPASS.128 [R3], desc[UR4][R6.64]");
  SassStats s = analyze_sass(listing);
  ASSERT_EQ(s.loops.size(), 3u);
  EXPECT_EQ(s.loops[0].async_copies, 1);
  EXPECT_EQ(s.loops[0].async_copy_bytes, 16);
  EXPECT_FALSE(s.loops[0].exposed_staging_load);
  EXPECT_FALSE(s.loops[0].exposed_global_load);
}

TEST(SassStats, ALoadAnFfmaReadsIsUsedDirectly) {
  std::string listing = kListing;
  listing.replace(listing.find("FFMA R30, R12, R13, R30"), 23, "FFMA R30, R24, R13, R30");
  SassStats s = analyze_sass(listing);
  ASSERT_EQ(s.loops.size(), 3u);
  EXPECT_TRUE(s.loops[2].exposed_global_load);
  EXPECT_FALSE(s.loops[2].exposed_staging_load);
}

// Two sides of a uniform branch: 0x0020-0x0040 (3 instructions, then a jump over the other side)
// and 0x0050-0x0060 (2), joining at EXIT; the branch to itself after EXIT is never reached.
constexpr const char* kBranches = R"(
        /*0000*/                   ISETP.NE.AND P0, PT, R0, RZ, PT ; /* 0x000000ff0000720c */
        /*0010*/               @P0 BRA 0x50 ;                   /* 0x0000000000000947 */
        /*0020*/                   MOV R1, RZ ;                 /* 0x000000ff00017202 */
        /*0030*/                   MOV R2, RZ ;                 /* 0x000000ff00027202 */
        /*0040*/                   BRA 0x70 ;                   /* 0x0000000000007947 */
        /*0050*/                   MOV R3, RZ ;                 /* 0x000000ff00037202 */
        /*0060*/                   MOV R4, RZ ;                 /* 0x000000ff00047202 */
        /*0070*/                   EXIT ;                       /* 0x000000000000794d */
        /*0080*/                   BRA 0x80;                    /* 0xfffffffc00fc7947 */
)";

TEST(SassStats, LongestPathTakesOneSideOfEachBranch) {
  SassStats s = analyze_sass(kBranches);
  ASSERT_EQ(s.instructions.size(), 9u);
  EXPECT_TRUE(s.instructions[1].guarded);
  EXPECT_FALSE(s.instructions[4].guarded);
  std::vector<bool> none(9, false);
  EXPECT_EQ(s.longest_path(none), 6);  // 0x00, 0x10, the first side (3), EXIT
  std::vector<bool> first_side(9, false);
  first_side[2] = first_side[3] = true;      // as if a counted loop: weight 0
  EXPECT_EQ(s.longest_path(first_side), 5);  // now the second side is the longer
  // A guarded EXIT falls through: the path goes on into the code after it.
  std::string guarded_exit = kBranches;
  guarded_exit.replace(guarded_exit.find("EXIT ;    "), 10, "@P1 EXIT ;");
  EXPECT_EQ(analyze_sass(guarded_exit).longest_path(none), 7);
  // An indirect branch's targets are not in the listing: every instruction counts.
  std::string indirect = kBranches;
  indirect.replace(indirect.find("MOV R1, RZ"), 10, "BRX R1 -0x0");
  EXPECT_EQ(analyze_sass(indirect).longest_path(none), 9);
}

TEST(SassStats, MmaFlopsPerWarpInstruction) {
  EXPECT_EQ(mma_flops_per_warp("HMMA.16816.F32.BF16"), 4096);
  EXPECT_EQ(mma_flops_per_warp("HMMA.1688.F32.TF32"), 2048);
  EXPECT_EQ(mma_flops_per_warp("HGMMA.64x128x16.F32.BF16"), 2.0 * 64 * 128 * 16 / 4);
  EXPECT_EQ(mma_flops_per_warp("FFMA"), 0);
  EXPECT_EQ(mma_flops_per_warp("IMAD.WIDE"), 0);
}

GpuSpec h200() { return *find_gpu("h200"); }

TEST(Occupancy, FromRegistersSharedMemoryAndThreads) {
  // 122 registers: 3904 per warp, 4096 allocated; 64K / 4096 = 16 warps = 4 blocks of 4 warps.
  // 46080 + 1024 reserved bytes: 233472 / 47104 = 4 blocks. Registers are checked first.
  Occupancy o = occupancy(h200(), 128, 122, 46080);
  EXPECT_EQ(o.blocks_per_sm, 4);
  EXPECT_EQ(o.limit, "registers");
  EXPECT_EQ(o.warps_per_block, 4);
  // 256 threads, 40 registers (1280 -> 1280 per warp; 51 warps -> 6 blocks of 8).
  EXPECT_EQ(occupancy(h200(), 256, 40, 8320).blocks_per_sm, 6);
  // Tiny blocks: 32 per SM at most.
  Occupancy tiny = occupancy(h200(), 32, 16, 0);
  EXPECT_EQ(tiny.blocks_per_sm, 32);
  EXPECT_EQ(tiny.limit, "blocks");
  // 1024 threads: 64 warps per SM allow 2.
  Occupancy wide = occupancy(h200(), 1024, 16, 0);
  EXPECT_EQ(wide.blocks_per_sm, 2);
  EXPECT_EQ(wide.limit, "warps");
  // More shared memory than a block may have, and the A100's smaller SM.
  EXPECT_EQ(occupancy(h200(), 128, 32, 228 * 1024).blocks_per_sm, 0);
  EXPECT_EQ(occupancy(*find_gpu("a100"), 128, 32, 100 * 1024).blocks_per_sm, 1);
  EXPECT_NE(occupancy(h200(), 128, -1, 0).limit.find("registers unknown"), std::string::npos);
}

KernelEstimate compute_bound(double ctas) {
  KernelEstimate e;
  e.launched = true;
  e.ctas = ctas;
  e.flops = e.tensor_flops = 1e9;
  e.bytes = 1e5;
  e.compute_seconds = e.tensor_flops / h200().tensor_flops;
  e.memory_seconds = e.bytes / h200().bytes_per_second;
  return e;
}

TEST(AchievableEstimate, FewBlocksLeaveSmsIdle) {
  KernelResources r;
  r.registers = 122;
  r.shared_bytes = 46080;
  for (double ctas : {8.0, 132.0, 528.0, 529.0}) {
    SCOPED_TRACE(ctas);
    KernelEstimate e = compute_bound(ctas);
    KernelModelInput in;
    in.roofline = &e;
    in.threads_per_block = 128;
    in.resources = &r;
    KernelModel m = model_kernel(in, h200());
    EXPECT_EQ(m.ctas_per_sm, 4);
    EXPECT_EQ(m.waves, std::ceil(ctas / (132.0 * 4)));
    EXPECT_GE(m.estimated_seconds, m.roofline_seconds);
    // No SASS: the tensor bound runs at the ceiling's share of the peak (Note [Tensor-core
    // ceiling]), per busiest SM; four warps keep the SM's four tensor units busy.
    double busiest = m.waves * std::min(4.0, std::ceil(ctas / 132));
    EXPECT_NEAR(m.tensor_seconds,
                busiest * (1e9 / ctas) / (h200().tensor_flops / 132 * h200().tensor_ceiling),
                1e-12);
    EXPECT_DOUBLE_EQ(m.estimated_seconds, kLaunchSeconds + m.tensor_seconds);
    EXPECT_EQ(m.limiter, "tensor");
    EXPECT_FALSE(m.issue_seconds.has_value());
    // issue, latency, shared, phases, instructions per MMA
    EXPECT_EQ(m.missing.size(), 5u);
    EXPECT_EQ(m.underfills_gpu, ctas < 132);
  }
  // 8 blocks on 132 SMs: 16.5x the roofline's compute time, over the ceiling.
  KernelEstimate e = compute_bound(8);
  KernelModelInput in;
  in.roofline = &e;
  in.threads_per_block = 128;
  in.resources = &r;
  EXPECT_NEAR(model_kernel(in, h200()).tensor_seconds / e.compute_seconds,
              132.0 / 8 / h200().tensor_ceiling, 1e-9);
}

TEST(AchievableEstimate, SassAddsIssueAndLatencyBounds) {
  SassStats s = analyze_sass(kListing);
  KernelEstimate e = compute_bound(132);
  KernelResources r;
  r.registers = 64;
  KernelModelInput in;
  in.roofline = &e;
  in.threads_per_block = 128;
  in.resources = &r;
  in.sass = &s;
  KernelModel m = model_kernel(in, h200());
  ASSERT_TRUE(m.instructions_per_mma.has_value());
  EXPECT_DOUBLE_EQ(*m.instructions_per_mma, 7.5);
  EXPECT_EQ(m.main_loop_inner_loops, 1);
  ASSERT_TRUE(m.issue_seconds && m.latency_seconds);
  EXPECT_TRUE(m.missing.empty());
  // Per warp: 1e9 / (132 blocks * 4 warps * 8192 FLOP) main-loop iterations of 15 instructions,
  // plus the 10 instructions outside it on the path to EXIT (the branch to itself after EXIT is
  // never reached); one block per SM, 4 warps on 4 schedulers.
  double iterations = 1e9 / (132.0 * 4 * 8192);
  double per_block = (iterations * 15 + 10) * 4;
  EXPECT_NEAR(*m.issue_seconds, per_block / (4 * h200().clock_hz), 1e-12);
  // HMMA runs at mma_sync_fraction of the peak on an H200.
  EXPECT_NEAR(m.tensor_seconds * h200().mma_sync_fraction, 1e9 / 132 / (h200().tensor_flops / 132),
              1e-12);
  EXPECT_GE(m.estimated_seconds, m.roofline_seconds);
}

TEST(EagerBaseline, CublasEfficiencyAndWaves) {
  GpuSpec g = h200();
  // A large square GEMM: its FLOPs at 0.8 of the peak, times the waves' utilisation (64 x 64 tiles
  // of 128 in 32 waves of 132); bytes are far below.
  double big = 8192;
  EXPECT_NEAR(cublas_seconds(big, big, big, 1, true, 0, g),
              2 * big * big * big / (g.tensor_flops * kCublasBf16Efficiency * 4096 / (32 * 132)),
              1e-9);
  // 4 tiles split 33 ways over K = 16384 (132 / 4 = 33 <= 16384 / 256) fill 132 SMs exactly; over K
  // = 8192 only 32 ways (8192 / 256), 128 of 132 SMs.
  double flops = 2 * 256.0 * 256 * 16384;
  EXPECT_NEAR(cublas_seconds(256, 256, 16384, 1, true, 0, g),
              flops / (g.tensor_flops * kCublasBf16Efficiency), 1e-12);
  EXPECT_NEAR(cublas_seconds(256, 256, 8192, 1, true, 0, g),
              flops / 2 / (g.tensor_flops * kCublasBf16Efficiency * 128 / 132), 1e-12);
  // fp32 runs at the SIMT peak; a memory-bound GEMM at the DRAM bandwidth.
  EXPECT_GT(cublas_seconds(big, big, big, 1, false, 0, g),
            10 * cublas_seconds(big, big, big, 1, true, 0, g));
  EXPECT_DOUBLE_EQ(cublas_seconds(64, 16, 16, 1, false, 4.8e6, g), 1e-6);
}

}  // namespace
}  // namespace dg
