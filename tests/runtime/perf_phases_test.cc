// The model's corrections against the SASS, on listings worked out by hand: loads waited for in
// series (Note [Serial loads]), shared-memory operand bytes, the tensor-core ceiling and the
// sub-partitions a small block leaves idle (Note [Tensor-core ceiling]), and a GEMM's phases timed
// one after another at one block per SM (Note [Phases in series]).
#include <gtest/gtest.h>

#include "runtime/model/perf_model.h"
#include "runtime/model/sass_phases.h"
#include "runtime/model/sass_stats.h"

namespace dg {
namespace {

GpuSpec h200() { return *find_gpu("h200"); }

// Straight code: two loads in flight read by one store (one staging round), a load read by an FFMA
// (one direct round), a shared load read by an HMMA (one shared round), a barrier.
constexpr const char* kStraight = R"(
        /*0000*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*0010*/                   LDG.E R5, desc[UR4][R2.64+0x4] ;
        /*0020*/                   STS.64 [R0], R4 ;
        /*0030*/                   LDG.E R8, desc[UR4][R2.64+0x8] ;
        /*0040*/                   FFMA R9, R8, R8, RZ ;
        /*0050*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0060*/                   LDSM.16.M88.4 R12, [R0] ;
        /*0070*/                   HMMA.16816.F32.BF16 R16, R12, R14, R16 ;
        /*0080*/                   EXIT ;
)";

TEST(SerialLoads, CountsRoundsOfWaits) {
  SassStats s = analyze_sass(kStraight);
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(s.instructions.size()); ++i) order.push_back(i);
  SerialLoads w = serial_loads(s, order);
  EXPECT_EQ(w.staging_rounds, 1);  // R4 and R5 in flight together
  EXPECT_EQ(w.direct_rounds, 1);
  EXPECT_EQ(w.shared_rounds, 1);
  EXPECT_EQ(w.barriers, 1);
  EXPECT_EQ(w.instructions, 9);
  // Unrolled into one batch: four loads first, then their stores, wait once.
  SassStats batched = analyze_sass(R"(
        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0010*/                   LDG.E.128 R8, desc[UR4][R2.64+0x10] ;
        /*0020*/                   STS.128 [R0], R4 ;
        /*0030*/                   STS.128 [R0+0x10], R8 ;
        /*0040*/                   EXIT ;
)");
  EXPECT_EQ(serial_loads(batched, {0, 1, 2, 3, 4}).staging_rounds, 1);
  // In series: load, store, load, store: two waits.
  SassStats serial = analyze_sass(R"(
        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0010*/                   STS.128 [R0], R4 ;
        /*0020*/                   LDG.E.128 R4, desc[UR4][R2.64+0x10] ;
        /*0030*/                   STS.128 [R0+0x10], R4 ;
        /*0040*/                   EXIT ;
)");
  EXPECT_EQ(serial_loads(serial, {0, 1, 2, 3, 4}).staging_rounds, 2);
}

TEST(SerialLoads, AsyncCopiesWaitAtTheirBarrier) {
  SassStats s = analyze_sass(R"(
        /*0000*/                   LDGSTS.E.BYPASS.128 [R0], desc[UR4][R2.64] ;
        /*0010*/                   LDGDEPBAR ;
        /*0020*/                   DEPBAR.LE SB0, 0x0 ;
        /*0030*/                   EXIT ;
)");
  EXPECT_EQ(serial_loads(s, {0, 1, 2, 3}).staging_rounds, 1);
}

// A warpgroup main loop: HGMMA 64x128x16 with A and B from shared memory, then one with A from
// registers; the counted loop runs 0x0010-0x0040.
constexpr const char* kWgmmaLoop = R"(
        /*0000*/                   MOV R2, RZ ;
        /*0010*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR12], R24 ;
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R24, R120, gdesc[UR16], R24, gsb0 ;
        /*0030*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0040*/               @P0 BRA 0x10 ;
        /*0050*/                   STG.E [R4.64], R24 ;
        /*0060*/                   EXIT ;
)";

TEST(SharedOperandBytes, HgmmaDescriptorsAndLdmatrix) {
  SassStats s = analyze_sass(kWgmmaLoop);
  ASSERT_EQ(s.main_mma_loop, 0);
  // Per warp, a quarter of each warpgroup instruction's operands: (64x16 + 128x16) x 2 bytes, then
  // B only.
  EXPECT_DOUBLE_EQ(shared_bytes_per_iteration(s, s.loops[0]),
                   (2.0 * 64 * 16 + 2.0 * 128 * 16) / 4 + 2.0 * 128 * 16 / 4);
  SassStats hmma = analyze_sass(R"(
        /*0000*/                   LDSM.16.M88.4 R12, [R0] ;
        /*0010*/                   LDS.128 R20, [R1] ;
        /*0020*/                   HMMA.16816.F32.BF16 R16, R12, R14, R16 ;
        /*0030*/               @P0 BRA 0x0 ;
        /*0040*/                   EXIT ;
)");
  EXPECT_DOUBLE_EQ(shared_bytes_per_iteration(hmma, hmma.loops[0]), 512 + 16 * 32);
  // ptxas's `@!PT LDS RZ, [RZ]` beside cp.async never executes: no bytes.
  SassStats padded = analyze_sass(R"(
        /*0000*/                   LDSM.16.M88.4 R12, [R0] ;
        /*0010*/              @!PT LDS RZ, [RZ] ;
        /*0020*/                   HMMA.16816.F32.BF16 R16, R12, R14, R16 ;
        /*0030*/               @P0 BRA 0x0 ;
        /*0040*/                   EXIT ;
)");
  EXPECT_DOUBLE_EQ(shared_bytes_per_iteration(padded, padded.loops[0]), 512);
}

KernelEstimate tensor_work(double ctas, double flops) {
  KernelEstimate e;
  e.launched = true;
  e.ctas = ctas;
  e.flops = e.tensor_flops = flops;
  e.bytes = 1e5;
  e.compute_seconds = flops / h200().tensor_flops;
  e.memory_seconds = e.bytes / h200().bytes_per_second;
  return e;
}

KernelModel model(const KernelEstimate& e, const SassStats* s, int threads, int registers) {
  KernelResources r;
  r.registers = registers;
  KernelModelInput in;
  in.roofline = &e;
  in.threads_per_block = threads;
  in.resources = &r;
  in.sass = s;
  return model_kernel(in, h200());
}

TEST(TensorCeiling, WgmmaIsChargedWhatCublasReaches) {
  SassStats s = analyze_sass(kWgmmaLoop);
  KernelEstimate e = tensor_work(132, 1e10);
  KernelModel m = model(e, &s, 384, 168);  // three warpgroups, one block per SM
  EXPECT_DOUBLE_EQ(m.tensor_fraction, 0.73);
  EXPECT_NEAR(m.tensor_seconds, 1e10 / (h200().tensor_flops * 0.73), 1e-12);
  // Instructions per MMA instruction, and per m16n8k16's FLOPs: 4 in the body, 2 HGMMAs of 16
  // m16n8k16s' FLOPs per warp each.
  ASSERT_TRUE(m.instructions_per_mma && m.instructions_per_m16n8k16);
  EXPECT_DOUBLE_EQ(*m.instructions_per_mma, 2.0);
  EXPECT_DOUBLE_EQ(*m.instructions_per_m16n8k16, 4.0 / 32);
}

TEST(TensorCeiling, AOneWarpBlockUsesOneOfFourUnits) {
  SassStats s = analyze_sass(R"(
        /*0000*/                   LDSM.16.M88.4 R12, [R0] ;
        /*0010*/                   HMMA.16816.F32.BF16 R16, R12, R14, R16 ;
        /*0020*/               @P0 BRA 0x0 ;
        /*0030*/                   EXIT ;
)");
  KernelEstimate e = tensor_work(132, 1e9);
  KernelModel one = model(e, &s, 32, 64);  // one block per SM: 132 blocks on 132 SMs
  EXPECT_NEAR(one.tensor_fraction, h200().mma_sync_fraction / 4, 1e-12);
  KernelEstimate four_per_sm = tensor_work(4 * 132, 1e9);
  EXPECT_NEAR(model(four_per_sm, &s, 32, 64).tensor_fraction, h200().mma_sync_fraction, 1e-12);
}

// Prologue: a rank-r operand staged in series (2 rounds); main loop; epilogue: 3 instructions.
constexpr const char* kPhased = R"(
        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0010*/                   STS.128 [R0], R4 ;
        /*0020*/                   LDG.E.128 R4, desc[UR4][R2.64+0x10] ;
        /*0030*/                   STS.128 [R0+0x10], R4 ;
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0050*/                   LDSM.16.M88.4 R12, [R0] ;
        /*0060*/                   HMMA.16816.F32.BF16 R16, R12, R14, R16 ;
        /*0070*/                   HMMA.16816.F32.BF16 R20, R12, R15, R20 ;
        /*0080*/               @P0 BRA 0x50 ;
        /*0090*/                   F2FP.BF16.F32.PACK_AB R24, R17, R16 ;
        /*00a0*/                   STG.E [R8.64], R24 ;
        /*00b0*/                   EXIT ;
)";

TEST(PhasesInSeries, OneBlockPerSmAddsItsPhases) {
  SassStats s = analyze_sass(kPhased);
  KernelEstimate e = tensor_work(132, 1e9);
  KernelModel m = model(e, &s, 256, 255);  // 255 registers: one block of 8 warps per SM
  ASSERT_EQ(m.ctas_per_sm, 1);
  ASSERT_EQ(m.phases.size(), 3u);
  EXPECT_EQ(m.phases[0].name, "prologue");
  EXPECT_EQ(m.phases[0].serial.staging_rounds, 2);
  EXPECT_EQ(m.phases[0].instructions_per_warp, 5);
  EXPECT_EQ(m.phases[2].instructions_per_warp, 3);
  double sum = 0;
  for (const PhaseModel& p : m.phases) sum += p.seconds;
  ASSERT_TRUE(m.phased_seconds.has_value());
  EXPECT_DOUBLE_EQ(*m.phased_seconds, sum);  // nothing overlaps at one block per SM
  EXPECT_GE(sum, m.overlapped_seconds);
  EXPECT_EQ(m.limiter, "phases");
  EXPECT_DOUBLE_EQ(m.estimated_seconds, kLaunchSeconds + sum);
  // The prologue's two serial loads: at least two DRAM latencies (the whole GPU's bytes are the
  // compulsory ones, so every staged load is a first touch).
  EXPECT_GE(m.phases[0].seconds, 2 * h200().dram_latency_clocks / h200().clock_hz);
  // Two blocks on each SM (264 on 132; four would fit): the other block runs while one waits;
  // half the excess remains.
  KernelEstimate two = tensor_work(264, 2e9);
  KernelModel m2 = model(two, &s, 128, 128);
  ASSERT_EQ(m2.ctas_per_sm, 4);
  double sum2 = 0;
  for (const PhaseModel& p : m2.phases) sum2 += p.seconds;
  ASSERT_TRUE(m2.phased_seconds.has_value());
  EXPECT_NEAR(*m2.phased_seconds, m2.overlapped_seconds + (sum2 - m2.overlapped_seconds) / 2,
              1e-15);
}

// Warp-specialized: the consumers' main loop and a 2-instruction epilogue, then (as ptxas lays it
// out) the producer's branch, which stages rank-r operands in series and is longer than the
// epilogue (Note [Rank-r staging beside the main loop]). Its copies run beside the main loop: the
// phases in series are the path through the main loop (Note [Longest path]).
constexpr const char* kProducerBranch = R"(
        /*0000*/                   ISETP.GE.AND P1, PT, R0, 0x100, PT ;
        /*0010*/               @P1 BRA 0x80 ;
        /*0020*/                   LDSM.16.M88.4 R12, [R0] ;
        /*0030*/                   HMMA.16816.F32.BF16 R16, R12, R14, R16 ;
        /*0040*/               @P0 BRA 0x20 ;
        /*0050*/                   STG.E [R8.64], R16 ;
        /*0060*/                   EXIT ;
        /*0070*/                   NOP ;
        /*0080*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0090*/                   STS.128 [R0], R4 ;
        /*00a0*/                   LDG.E.128 R4, desc[UR4][R2.64+0x10] ;
        /*00b0*/                   STS.128 [R0+0x10], R4 ;
        /*00c0*/                   LDG.E.128 R4, desc[UR4][R2.64+0x20] ;
        /*00d0*/                   STS.128 [R0+0x20], R4 ;
        /*00e0*/                   EXIT ;
)";

TEST(PhasesInSeries, AProducerBranchIsNotAnEpilogue) {
  SassStats s = analyze_sass(kProducerBranch);
  ASSERT_GE(s.main_mma_loop, 0);
  std::vector<bool> counted(s.instructions.size(), false);
  for (int j = s.loops[s.main_mma_loop].begin; j <= s.loops[s.main_mma_loop].end; ++j)
    counted[j] = true;
  // Unconstrained, the longest path is the producer's branch (9 instructions against 6).
  EXPECT_EQ(longest_path_instructions(s, counted).size(), 9u);
  SassPhase before, after;
  split_at_main_loop(s, counted, &before, &after);
  EXPECT_EQ(before.instructions, 2);
  EXPECT_EQ(after.instructions, 2);  // STG, EXIT
  EXPECT_EQ(after.serial.staging_rounds, 0);
}

// Note [Out-of-line waits]: the main loop's wait retries in a stub after EXIT that returns into
// the loop; the epilogue holds wgmmas of its own (Note [Rank-r products on tensor cores]). The
// stub's return closes no loop, so the main loop is the real one, not a span to the stub.
TEST(LoopsInSass, AnOutOfLineWaitsReturnIsNoLoop) {
  SassStats s = analyze_sass(R"(
        /*0000*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR10], R5 ;
        /*0010*/               @!P0 BRA 0x90 ;
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR16], R24 ;
        /*0030*/               @P1 BRA 0x0 ;
        /*0040*/                   HGMMA.64x32x16.F32.BF16 R168, gdesc[UR16], RZ, !UPT ;
        /*0050*/                   HGMMA.64x32x16.F32.BF16 R168, gdesc[UR16], R168 ;
        /*0060*/                   HGMMA.64x32x16.F32.BF16 R168, gdesc[UR20], R168 ;
        /*0070*/                   STG.E [R8.64], R168 ;
        /*0080*/                   EXIT ;
        /*0090*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR10], R5 ;
        /*00a0*/               @!P0 BRA 0x90 ;
        /*00b0*/                   BRA 0x20 ;
)");
  ASSERT_EQ(s.loops.size(), 2u);  // the main loop and the stub's spin
  ASSERT_GE(s.main_mma_loop, 0);
  EXPECT_EQ(s.loops[s.main_mma_loop].begin, 0);
  EXPECT_EQ(s.loops[s.main_mma_loop].end, 3);
}

TEST(PhasesInSeries, NoMainLoopNoPhases) {
  SassStats s = analyze_sass(kStraight);  // HMMA outside any loop
  KernelEstimate e = tensor_work(132, 1e6);
  KernelModel m = model(e, &s, 128, 64);
  EXPECT_TRUE(m.phases.empty());
  EXPECT_FALSE(m.phased_seconds.has_value());
  // The straight code's rounds still count in the latency bound: at least one staging round
  // (DRAM), one direct (L2) and one shared (L1).
  ASSERT_TRUE(m.latency_seconds.has_value());
  const GpuSpec g = h200();
  EXPECT_GE(*m.latency_seconds,
            (g.dram_latency_clocks + g.l2_latency_clocks + g.l1_latency_clocks) / g.clock_hz);
}

}  // namespace
}  // namespace dg
