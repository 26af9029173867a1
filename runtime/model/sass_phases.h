// What one warp runs before, inside and after a kernel's main loop, read from its SASS: the phases
// the performance model times one after another (Note [Phases in series] in perf_model.h), the
// loads each phase waits for in series, and the shared-memory bytes a main-loop iteration moves.
//
// Note [Serial loads]
// A warp stalls on a load when an instruction reads a register the load writes (its scoreboard).
// Loads issued before that first read are in flight together and cost one latency between them;
// so along a sequence of instructions (a path through straight code, or one iteration of a loop)
// the waits come in rounds: a round starts at the first load after the previous wait and ends at
// the first instruction that reads a register one of its loads writes. Each round costs one
// latency of its kind:
//  - staging: a global load whose first reader is a shared-memory store (a tile staged by
//    threads), or a wait on asynchronous copies (DEPBAR after LDGSTS, an mbarrier wait
//    SYNCS.PHASECHK for a TMA copy in straight code): a first touch, from DRAM or L2;
//  - direct: a global load read by anything else (an epilogue's operand);
//  - shared: LDS/LDSM read by the next instructions.
// `rolled_loops` counts the loops whose bodies lie on a straight path: their trip count is not in
// the SASS, so the body counts once and the phase's figures are lower bounds (the plan says so).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/sass_stats.h"

namespace dg {

struct SerialLoads {
  int staging_rounds = 0, direct_rounds = 0, shared_rounds = 0;
  int barriers = 0;      // BAR.SYNC / BAR.RED / BAR.ARV
  int instructions = 0;  // issued in order, one a clock at best
};

// The rounds of waits along `order` (indices into s.instructions, in issue order). In a loop that
// copies with LDGSTS the synchronous LDGs are its unaligned fallback (Note [Loops in SASS]): with
// `ignore_sync_global_loads` they do not count.
SerialLoads serial_loads(const SassStats& s, const std::vector<int>& order,
                         bool ignore_sync_global_loads = false);

// One iteration of a loop, in address order.
SerialLoads loop_serial_loads(const SassStats& s, const SassLoop& l);

struct SassPhase {
  int instructions = 0;  // per warp, the loops counted by iterations left out
  SerialLoads serial;
  int rolled_loops = 0;  // loop bodies on the path, counted once (Note [Serial loads])
};

// The longest path through the function (Note [Longest path]) as instruction indices, every
// instruction on it included; the loops `excluded` marks still lie on it (their weight is 0).
// With through_begin >= 0 the longest of the paths through instructions [through_begin,
// through_end] (the main loop), or the longest path when none passes there.
std::vector<int> longest_path_instructions(const SassStats& s, const std::vector<bool>& excluded,
                                           int through_begin = -1, int through_end = -1);

// The instructions of the longest path before the main MMA loop (`before`) and after it (`after`),
// the loops `counted` marks left out. Without a main loop everything is `before`.
void split_at_main_loop(const SassStats& s, const std::vector<bool>& counted, SassPhase* before,
                        SassPhase* after);

// Shared-memory bytes one warp's iteration of `l` reads and writes: LDSM/LDS/STS and LDGSTS at 32
// lanes, and an HGMMA's operands read from shared memory (A when its descriptor is given, B
// always), a quarter per warp of the warpgroup (Note [Shared-memory operand bandwidth]).
double shared_bytes_per_iteration(const SassStats& s, const SassLoop& l);

}  // namespace dg
