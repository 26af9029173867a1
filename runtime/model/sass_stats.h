// Static statistics of one kernel's SASS (the text `cuobjdump -sass` prints for a function): its
// instructions, its loops, and per loop what the performance model needs (perf_model.h).
//
// Note [Loops in SASS]
// A loop is a backward branch: a `BRA` at address b whose target t is at or before b (a branch to
// itself, the padding after EXIT, is not a loop, nor is the return of an mbarrier wait's
// out-of-line retry: Note [Out-of-line waits] in sass_stats.cc). Its body is every instruction from
// t to b, in address order, inner loops included once. Loops nest by address range. The main MMA
// loop is the loop with the most tensor-core MMAs (HMMA, HGMMA) in its body, the shortest one on a
// tie (the innermost of nested loops; of the main loop's variants in Note [Lean main loop], the one
// that aligned launches run for blocks inside M and N, whose loops have no predicates); its
// instructions per MMA is body instructions / MMAs. That is a static count: an inner loop inside
// the main loop counts once whatever its trip count, and both sides of a branch in the body count,
// so `inner_loops` says when the figure is a lower bound of the dynamic one (the target
// is a main loop with no inner loop, where it is exact but for branches). The SIMT work loops are
// the loops holding FFMAs that hold no inner loop with FFMAs (the serial K loop of a scalar GEMM
// tile, the rank-r loop of an epilogue). A load's latency is exposed in a loop when an instruction
// after it in the same body reads a register it writes (a global load whose value is stored to
// shared memory or used by an FFMA in the same iteration, a shared-memory load feeding an MMA); a
// load consumed only in a later iteration (software pipelining) or an asynchronous copy (LDGSTS) is
// not; nor is an LDG in a loop that copies with LDGSTS: dyngen's cp.async copies keep a synchronous
// path for operands that are not 16-byte aligned, which an aligned launch does not run.
//
// Note [Longest path]
// Code outside the loops the model counts by iterations runs about once per warp, but only one
// side of each branch: a kernel that switches on its problem (the weight-gradient partials of six
// GEMMs, a grouped GEMM) or on a uniform variant (the main loop's aligned pipeline and unaligned
// loop) holds every side in its SASS, and a warp runs one. So the once-per-warp count is the
// longest path through the forward edges -- a fall-through, unless the instruction is an unguarded
// BRA, EXIT or RET, and a BRA to a later address -- with backward branches (loops) taken zero
// times: the body of a loop not counted by iterations counts once, as before. Addresses increase
// along every forward edge, so one pass in address order finds it. With each of those other loops
// run once, the longest path is an upper bound of what a warp runs; an indirect branch (BRX, JMX),
// whose targets the listing does not give, makes it the sum of every instruction instead.
// A kernel with a main MMA loop takes the longest path through that loop (split_at_main_loop): its
// phases in series are what the MMA warps run, while a warp-specialized producer's own branch
// (the TMA loop, the rank-r stagers of Note [Rank-r staging beside the main loop]) runs beside
// them; a path through the producer's branch counted the stagers' copies as an epilogue in series.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dg {

struct SassInstruction {
  int64_t address = 0;
  std::string opcode;                 // with modifiers: "HMMA.16816.F32.BF16", "LDG.E.128"
  std::vector<std::string> operands;  // as printed, the destination first where there is one
  int64_t branch_target = -1;         // BRA: the target address
  bool guarded = false;               // under a predicate (@P0, @!P1): it may fall through
  // Under @!PT, false on every lane: it takes an issue slot and does nothing (ptxas's padding,
  // `@!PT LDS RZ, [RZ]` beside cp.async), so it moves no bytes.
  bool never = false;
};

struct SassLoop {
  int begin = 0, end = 0;  // indices into SassStats::instructions, inclusive
                           // (end: the branch)
  int instructions = 0;    // end - begin + 1
  int mma = 0;             // HMMA / HGMMA in the body
  double mma_flops = 0;    // their FLOPs per warp, summed
  int ffma = 0;
  int global_loads = 0;           // LDG
  int async_copies = 0;           // LDGSTS (cp.async)
  int shared_loads = 0;           // LDS, LDSM
  int barriers = 0;               // BAR.SYNC / BAR.RED / BAR.ARV
  int inner_loops = 0;            // loops strictly inside this one
  int64_t global_load_bytes = 0;  // per thread per iteration: the widths of its LDGs
  int64_t async_copy_bytes = 0;   // and of its LDGSTS
  // An LDG whose value the same iteration reads, in a loop with no LDGSTS (in a cp.async loop the
  // synchronous loads are the unaligned fallback path, not what an aligned launch runs): read
  // first by an STS (staging a tile in shared memory), or by anything else (direct use).
  bool exposed_staging_load = false;
  bool exposed_global_load = false;  // direct use
  bool exposed_shared_load = false;
};

struct SassStats {
  std::vector<SassInstruction> instructions;
  std::vector<SassLoop> loops;  // in order of their backward branch
  int mma = 0, ffma = 0;
  double mma_flops = 0;         // per warp, over the whole function, each instruction once
  int main_mma_loop = -1;       // index into loops (Note [Loops in SASS]); -1 when no loop has MMAs
  std::vector<int> simt_loops;  // indices into loops
  // Main loop body instructions per MMA, counting an MMA as one m16n8k16 HMMA's FLOPs (an
  // HGMMA.64x128x16 is sixteen); 0 when there is no main MMA loop.
  double instructions_per_m16n8k16() const;
  // The most instructions one warp issues on a path from the entry to an exit taking each
  // branch's side at most once (Note [Longest path]), not counting those `excluded` marks (one
  // flag per instruction: the loops the model counts by their iterations).
  int longest_path(const std::vector<bool>& excluded) const;
};

// FLOPs one warp's instruction performs: HMMA.MNK (m16n8k16: 2*16*8*16), HGMMA.MxNxK (a warpgroup
// instruction, a quarter per warp); 0 for anything else.
double mma_flops_per_warp(const std::string& opcode);

// Parses the listing of one function (sass_by_function's text) and finds its loops.
SassStats analyze_sass(const std::string& function_sass);

}  // namespace dg
