// The host emulation's execution engine: a block's threads run as fibers on one OS thread, and the
// blocks of a grid are spread over a few OS threads. Header-only, so that a generated module (.so)
// carries its own engine and needs nothing from the library that loads it.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dg_emu_fiber.h"
#include "dg_emu_options.h"
#include "dg_emu_types.h"

namespace dg::emu {

enum class ThreadState : uint8_t { kReady, kBlockBarrier, kWarpCollective, kExited, kFailed };

// Note [Warp collectives]
// A shuffle, vote, __syncwarp, ldmatrix or mma is one "collective": each
// participating lane writes its inputs to its LaneSlot and parks; the last lane to arrive runs the
// collective's WarpOp once over all slots, which writes every lane's `out`, and readies the others.
// Computing all results at once means no slot is read after its owner has moved on, so no second
// barrier is needed. The participants are the lanes in `mask` that exist (a partial last warp has
// fewer); a mask naming an exited lane, or lanes meeting at different collectives, is an error
// rather than the undefined behaviour it is on a GPU. Lanes meet at "the same collective" when
// the op, the mask and the call site agree: the CUDA intrinsics (__shfl_sync, __syncwarp, ...)
// record the file and line they are called from, so two __syncwarp()s in the two arms of a
// divergent branch do not pair up as they would if only (op, mask) were compared; ldmatrix and
// mma are always called from one place in the device layer and are told apart by their op.
struct LaneSlot;
using WarpOp = void (*)(LaneSlot* lanes, uint32_t participants);

// Where a warp collective was called from (Note [Warp collectives]).
struct CallSite {
  const char* file = nullptr;
  unsigned line = 0;
  bool operator==(const CallSite& o) const {
    return line == o.line && (file == o.file || (file && o.file && std::strcmp(file, o.file) == 0));
  }
};

struct LaneSlot {
  WarpOp op;
  uint32_t mask;
  CallSite site;
  const void* ptr;
  uint64_t in[10];
  uint64_t out[4];
};

// One wgmma.mma_async of a warp, issued and not yet retired by a wgmma.wait_group (Note [Deferred
// wgmma] in codegen/device/dg_wgmma_sm90_emu.h): the warp's 16 rows of an m64nNk16 product.
struct AsyncMma {
  uint64_t desc_a = 0, desc_b = 0;
  int n = 0;                // N of m64nNk16
  int warp_in_group = 0;    // the warp's rows are 16 * warp_in_group + [0, 16) of the 64
  bool accumulate = false;  // scale-d: d = a b + d, else d = a b
  bool a_mn_major = false, b_mn_major = false;  // imm-trans-a, imm-trans-b
  float* d[32] = {};                            // each lane's accumulator registers (n / 2 floats)
  std::vector<float> c;     // their values at issue, n / 2 per lane; empty: the op before it
                            // in the warp's queue writes d (a chain of k steps)
  std::vector<float> a, b;  // the operands (16 x 16 of A, n x 16 of B) once read from shared
                            // memory: at issue or at retirement (DYNGEN_EMU_ASYNC)
};

struct Warp {
  LaneSlot lane[32];
  uint32_t arrived = 0;   // lanes parked at a collective
  uint32_t exited = 0;    // lanes whose thread has returned
  uint32_t existing = 0;  // lanes that exist in this block
  // wgmma state (Note [Deferred wgmma]): issued operations, oldest first; the end index of each
  // committed group; whether a wgmma.fence came before the first wgmma.
  std::vector<AsyncMma> mma_pending;
  std::vector<size_t> mma_group_ends;
  bool mma_fenced = false;
  // setmaxnreg (Note [Warpgroup register counts] in codegen/device/dg_wgmma_sm90.cuh): how many
  // the warp has executed, the latest two (count << 1 | inc, by rank parity), and the lanes parked
  // until the rest of the warpgroup executes the latest.
  uint32_t maxnreg_done = 0, maxnreg_last[2] = {0, 0}, maxnreg_parked = 0;
};

// One cp.async in flight; see Note [Deferred cp.async].
struct AsyncCopy {
  void* dst;
  const void* src;
  uint32_t bytes;
  uint32_t src_bytes;  // bytes read from src; the rest of dst is zero-filled
  bool landed;         // performed already (DYNGEN_EMU_ASYNC=issue or random); still in flight
};

// One shared-memory access as the race detector remembers it (Note [Race detector]).
struct RaceAccess {
  uint32_t epoch = 0;       // the block's barrier interval + 1; 0: none
  uint32_t warp_epoch = 0;  // the accessing warp's __syncwarp count at the time
  uint16_t thread1 = 0;     // linear thread index + 1
  uint8_t kind = 0;         // RaceKind
};

// What the detector knows about one byte of shared memory.
struct RaceByte {
  RaceAccess write;
  RaceAccess read[2];     // two distinct readers of the latest interval suffice (Note)
  uint16_t async_owner1;  // thread (+1) whose cp.async to this byte is not yet waited for
};

// One emulated CUDA thread.
struct Thread {
  FiberContext ctx;
  FiberStack stack;
  uint3 tid;
  unsigned linear = 0;
  ThreadState state = ThreadState::kReady;
  bool started = false;
  std::vector<AsyncCopy> async_copies;   // issued and not yet complete, oldest first
  std::vector<size_t> async_group_ends;  // committed groups: end index into async_copies
  uint64_t async_base_seq = 0;           // issue number of async_copies[0]
};

// A cp.async that DYNGEN_EMU_ASYNC=random lands at a later scheduler step: thread and issue number.
struct AsyncLanding {
  unsigned thread;
  uint64_t seq;
};

// One block in flight on a worker (OS thread); reused for every block the worker runs.
struct Block {
  uint3 block_idx{0, 0, 0};
  dim3 block_dim, grid_dim;
  unsigned n_threads = 0;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  std::vector<unsigned> queue;  // ready threads: a ring holding each thread at most once
  size_t q_head = 0, q_size = 0;
  unsigned n_exited = 0;
  unsigned bar_arrived = 0, bar_generation = 0;
  int bar_count[2] = {0, 0}, bar_result[2] = {0, 0};
  unsigned char* dyn_smem = nullptr;
  size_t dyn_smem_bytes = 0;
  // Dynamic shared memory's shared-window address (Note [Emulated shared window]).
  uint32_t dyn_window = 0;
  // The async proxy's view of dynamic shared memory, made on first use in a block (Note [Async
  // proxy] in dg_emu_proxy.h).
  std::vector<unsigned char> async_view;
  bool async_view_live = false;
  FiberContext sched;  // the worker's own context, which runs the scheduler loop
  std::string error;
  void (*body)(void*) = nullptr;  // runs the kernel for the current thread
  void* body_arg = nullptr;
  std::vector<FiberStack> free_stacks;  // Note [Stack pool]
  const Options* opts = nullptr;        // this launch's options
  uint64_t rng = 0;                     // the block's random stream (Note [Adversarial emulation])
  uint64_t step = 0;                    // scheduler steps so far
  uint64_t mbarrier_changes = 0;        // mbarrier updates so far (Note [mbarrier semantics])
  // TMA box copies issued and not landed (Note [TMA box copies] in dg_tma_sm90.cuh), and the
  // function that lands those of one barrier, which waits on it call.
  std::vector<std::shared_ptr<void>> bulk_pending;
  void (*land_bulk)(const void* bar) = nullptr;
  std::vector<std::vector<AsyncLanding>> landings;  // a timer wheel indexed by step
  unsigned char* static_smem = nullptr;             // this worker's static __shared__ variables
  size_t static_smem_bytes = 0;                     // (Note [Poisoned shared memory])
  std::vector<RaceByte> race;         // DYNGEN_EMU_RACECHECK: dynamic bytes, then static ones
  std::vector<uint32_t> warp_epochs;  // __syncwarp count of each warp, for the race detector
  uint32_t race_epoch_base = 0;       // barrier intervals of the worker's earlier blocks
};

// Note [Engine thread-locals]
// The block and thread being emulated on this OS thread (threadIdx
// and friends read these). They sit in one initialized thread_local, so they are in the module's
// .tdata and never in .tbss, which holds only static __shared__ variables and is poisoned per
// block (Note [Poisoned shared memory]).
struct EngineLocals {
  Block* block;
  Thread* thread;
  uint32_t initialized;  // nonzero, which keeps the object out of .tbss
};
inline thread_local EngineLocals t_emu = {nullptr, nullptr, 1};

// The block's random stream (splitmix64).
inline uint64_t next_random(Block& b) {
  uint64_t z = (b.rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline void push_ready(Block& b, Thread& t) {
  t.state = ThreadState::kReady;
  b.queue[(b.q_head + b.q_size++) % b.n_threads] = t.linear;
}

// Gives control back to the scheduler; returns when the thread is readied again.
inline void park(ThreadState state) {
  t_emu.thread->state = state;
  fiber_switch(&t_emu.thread->ctx, &t_emu.block->sched);
}

// Ends the launch with `message`; called from kernel code, never returns.
[[noreturn]] inline void fail(const std::string& message) {
  Block* b = t_emu.block;
  if (b == nullptr || t_emu.thread == nullptr) {
    std::fprintf(stderr, "dyngen emulation: %s (outside a kernel)\n", message.c_str());
    std::abort();
  }
  if (b->error.empty()) b->error = message;
  park(ThreadState::kFailed);
  __builtin_unreachable();
}

inline std::string where() {
  char buf[96];
  std::snprintf(buf, sizeof buf, "block (%u,%u,%u) thread (%u,%u,%u)", t_emu.block->block_idx.x,
                t_emu.block->block_idx.y, t_emu.block->block_idx.z, t_emu.thread->tid.x,
                t_emu.thread->tid.y, t_emu.thread->tid.z);
  return buf;
}

// In DYNGEN_EMU_SCHED=random: back to the ready set, from which the scheduler picks at random.
inline void yield_now() {
  push_ready(*t_emu.block, *t_emu.thread);
  park(ThreadState::kReady);
}

// A preemption point of the random scheduler (cp.async issue, commit, wait): yields one time in 4.
inline void maybe_yield() {
  Block& b = *t_emu.block;
  if (b.opts->sched == SchedMode::kRandom && (next_random(b) & 3) == 0) yield_now();
}

// __syncthreads_count(pred): every thread of the block must arrive (Note [Strict barriers]).
inline int sync_block(int pred) {
  Block& b = *t_emu.block;
  unsigned parity = b.bar_generation & 1;
  b.bar_count[parity] += pred;
  if (++b.bar_arrived == b.n_threads) {
    b.bar_result[parity] = b.bar_count[parity];
    b.bar_count[parity] = 0;
    b.bar_arrived = 0;
    ++b.bar_generation;
    for (Thread& t : b.threads)
      if (t.state == ThreadState::kBlockBarrier) push_ready(b, t);
    // The last to arrive does not go on first in random mode (Note [Adversarial emulation]).
    if (b.opts->sched == SchedMode::kRandom) yield_now();
    return b.bar_result[parity];
  }
  park(ThreadState::kBlockBarrier);
  // The result slot of this parity is rewritten only when every thread, this one included, has
  // reached the barrier after next.
  return b.bar_result[parity];
}

// Runs one warp collective for the calling lane (Note [Warp collectives]). The caller has filled
// its slot's inputs; on return its outputs are ready. `site` names the call site (the source line
// of a CUDA intrinsic's call, or nullptr for the device layer's ldmatrix and mma): lanes must meet
// at the same site, as they must reach the same instruction on a GPU.
inline void warp_collective(uint32_t mask, WarpOp op, const CallSite* site = nullptr) {
  Block& b = *t_emu.block;
  Thread& self = *t_emu.thread;
  unsigned wi = self.linear >> 5, lane = self.linear & 31;
  Warp& w = b.warps[wi];
  uint32_t me = 1u << lane;
  mask &= w.existing;
  if (!(mask & me)) fail(where() + ": warp collective with a mask that excludes the calling lane");
  if (mask & w.exited) fail(where() + ": warp collective names lanes that have already exited");
  w.lane[lane].op = op;
  w.lane[lane].mask = mask;
  w.lane[lane].site = site == nullptr ? CallSite{} : *site;
  w.arrived |= me;
  if ((w.arrived & mask) != mask) {
    park(ThreadState::kWarpCollective);
    return;
  }
  for (uint32_t m = mask; m; m &= m - 1) {
    const LaneSlot& s = w.lane[__builtin_ctz(m)];
    if (s.op != op || s.mask != mask)
      fail(where() + ": lanes of one warp meet at different warp collectives (divergent code)");
    if (!(s.site == w.lane[lane].site)) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    ": lanes %d and %u of a warp meet at one kind of warp collective from "
                    "different call sites (%s:%u and %s:%u): divergent code",
                    __builtin_ctz(m), lane, s.site.file ? s.site.file : "?", s.site.line,
                    w.lane[lane].site.file ? w.lane[lane].site.file : "?", w.lane[lane].site.line);
      fail(where() + buf);
    }
  }
  if (op != nullptr) op(w.lane, mask);
  // A __syncwarp, or a collective of the whole warp, orders the lanes' shared-memory accesses
  // before it and after it (Note [Race detector]).
  if (op == nullptr || mask == w.existing) ++b.warp_epochs[wi];
  w.arrived &= ~mask;
  for (uint32_t m = mask & ~me; m; m &= m - 1) push_ready(b, b.threads[wi * 32 + __builtin_ctz(m)]);
  if (b.opts->sched == SchedMode::kRandom) yield_now();
}

inline LaneSlot& my_lane_slot() {
  return t_emu.block->warps[t_emu.thread->linear >> 5].lane[t_emu.thread->linear & 31];
}

inline uint32_t active_mask() {
  const Warp& w = t_emu.block->warps[t_emu.thread->linear >> 5];
  return w.existing & ~w.exited;
}

inline unsigned char* dynamic_smem() { return t_emu.block->dyn_smem; }

}  // namespace dg::emu
