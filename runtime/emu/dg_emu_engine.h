// The host emulation's execution engine: a block's threads run as fibers on one OS thread, and the
// blocks of a grid are spread over a few OS threads. Header-only, so that a generated module (.so)
// carries its own engine and needs nothing from the library that loads it.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dg_emu_fiber.h"
#include "dg_emu_types.h"

namespace dg::emu {

// Options read once per module from the environment.
struct Options {
  unsigned threads = 1;           // DYNGEN_EMU_THREADS: OS threads per launch (default: cores)
  size_t stack_bytes = 64 << 10;  // DYNGEN_EMU_STACK_KB: stack per emulated CUDA thread
};

const Options& options();

enum class ThreadState : uint8_t { kReady, kBlockBarrier, kWarpCollective, kExited, kFailed };

// Note [Warp collectives]: a shuffle, vote, __syncwarp, ldmatrix or mma is one "collective": each
// participating lane writes its inputs to its LaneSlot and parks; the last lane to arrive runs the
// collective's WarpOp once over all slots, which writes every lane's `out`, and readies the others.
// Computing all results at once means no slot is read after its owner has moved on, so no second
// barrier is needed. The participants are the lanes in `mask` that exist (a partial last warp has
// fewer); a mask naming an exited lane, or lanes meeting at different collectives, is an error
// rather than the undefined behaviour it is on a GPU.
struct LaneSlot;
using WarpOp = void (*)(LaneSlot* lanes, uint32_t participants);

struct LaneSlot {
  WarpOp op;
  uint32_t mask;
  const void* ptr;
  uint64_t in[10];
  uint64_t out[4];
};

struct Warp {
  LaneSlot lane[32];
  uint32_t arrived = 0;   // lanes parked at a collective
  uint32_t exited = 0;    // lanes whose thread has returned
  uint32_t existing = 0;  // lanes that exist in this block
};

// One cp.async in flight; see Note [Deferred cp.async].
struct AsyncCopy {
  void* dst;
  const void* src;
  uint32_t bytes;
  uint32_t src_bytes;  // bytes read from src; the rest of dst is zero-filled
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
  FiberContext sched;  // the worker's own context, which runs the scheduler loop
  std::string error;
  void (*body)(void*) = nullptr;  // runs the kernel for the current thread
  void* body_arg = nullptr;
  std::vector<FiberStack> free_stacks;  // Note [Stack pool]
};

// The block and thread being emulated on this OS thread; threadIdx and friends read these.
inline thread_local Block* t_block = nullptr;
inline thread_local Thread* t_thread = nullptr;

inline void push_ready(Block& b, Thread& t) {
  t.state = ThreadState::kReady;
  b.queue[(b.q_head + b.q_size++) % b.n_threads] = t.linear;
}

// Gives control back to the scheduler; returns when the thread is readied again.
inline void park(ThreadState state) {
  t_thread->state = state;
  fiber_switch(&t_thread->ctx, &t_block->sched);
}

// Ends the launch with `message`; called from kernel code, never returns.
[[noreturn]] inline void fail(const std::string& message) {
  Block* b = t_block;
  if (b == nullptr || t_thread == nullptr) {
    std::fprintf(stderr, "dyngen emulation: %s (outside a kernel)\n", message.c_str());
    std::abort();
  }
  if (b->error.empty()) b->error = message;
  park(ThreadState::kFailed);
  __builtin_unreachable();
}

inline std::string where() {
  char buf[96];
  std::snprintf(buf, sizeof buf, "block (%u,%u,%u) thread (%u,%u,%u)", t_block->block_idx.x,
                t_block->block_idx.y, t_block->block_idx.z, t_thread->tid.x, t_thread->tid.y,
                t_thread->tid.z);
  return buf;
}

// __syncthreads_count(pred): every thread of the block must arrive (Note [Strict barriers]).
inline int sync_block(int pred) {
  Block& b = *t_block;
  unsigned parity = b.bar_generation & 1;
  b.bar_count[parity] += pred;
  if (++b.bar_arrived == b.n_threads) {
    b.bar_result[parity] = b.bar_count[parity];
    b.bar_count[parity] = 0;
    b.bar_arrived = 0;
    ++b.bar_generation;
    for (Thread& t : b.threads)
      if (t.state == ThreadState::kBlockBarrier) push_ready(b, t);
    return b.bar_result[parity];
  }
  park(ThreadState::kBlockBarrier);
  // The result slot of this parity is rewritten only when every thread, this one included, has
  // reached the barrier after next.
  return b.bar_result[parity];
}

// Runs one warp collective for the calling lane (Note [Warp collectives]). The caller has filled
// its slot's inputs; on return its outputs are ready.
inline void warp_collective(uint32_t mask, WarpOp op) {
  Block& b = *t_block;
  Thread& self = *t_thread;
  unsigned wi = self.linear >> 5, lane = self.linear & 31;
  Warp& w = b.warps[wi];
  uint32_t me = 1u << lane;
  mask &= w.existing;
  if (!(mask & me)) fail(where() + ": warp collective with a mask that excludes the calling lane");
  if (mask & w.exited) fail(where() + ": warp collective names lanes that have already exited");
  w.lane[lane].op = op;
  w.lane[lane].mask = mask;
  w.arrived |= me;
  if ((w.arrived & mask) != mask) {
    park(ThreadState::kWarpCollective);
    return;
  }
  for (uint32_t m = mask; m; m &= m - 1) {
    const LaneSlot& s = w.lane[__builtin_ctz(m)];
    if (s.op != op || s.mask != mask)
      fail(where() + ": lanes of one warp meet at different warp collectives (divergent code)");
  }
  if (op != nullptr) op(w.lane, mask);
  w.arrived &= ~mask;
  for (uint32_t m = mask & ~me; m; m &= m - 1) push_ready(b, b.threads[wi * 32 + __builtin_ctz(m)]);
}

inline LaneSlot& my_lane_slot() {
  return t_block->warps[t_thread->linear >> 5].lane[t_thread->linear & 31];
}

inline uint32_t active_mask() {
  const Warp& w = t_block->warps[t_thread->linear >> 5];
  return w.existing & ~w.exited;
}

inline unsigned char* dynamic_smem() { return t_block->dyn_smem; }

// Note [Deferred cp.async]: cp.async copies are queued per thread and performed when a
// wait_group (or wait_all, or the thread's exit) retires their group, not when issued. Reading
// shared memory before the matching wait therefore sees stale data here, as it may on a GPU, so
// a missing wait shows up as wrong numbers instead of passing by luck.
inline void async_copy(void* dst, const void* src, uint32_t bytes, uint32_t src_bytes) {
  t_thread->async_copies.push_back(AsyncCopy{dst, src, bytes, src_bytes});
}

inline void async_commit() { t_thread->async_group_ends.push_back(t_thread->async_copies.size()); }

inline void async_complete(Thread& t, size_t n_copies) {
  for (size_t i = 0; i < n_copies; ++i) {
    const AsyncCopy& c = t.async_copies[i];
    std::memcpy(c.dst, c.src, c.src_bytes);
    std::memset(static_cast<char*>(c.dst) + c.src_bytes, 0, c.bytes - c.src_bytes);
  }
  t.async_copies.erase(t.async_copies.begin(), t.async_copies.begin() + n_copies);
  for (size_t& end : t.async_group_ends) end -= n_copies;
}

// cp.async.wait_group n: all but the newest n committed groups are complete.
inline void async_wait(unsigned n) {
  Thread& t = *t_thread;
  size_t groups = t.async_group_ends.size();
  if (groups <= n) return;
  size_t retire = groups - n;
  size_t n_copies = t.async_group_ends[retire - 1];
  t.async_group_ends.erase(t.async_group_ends.begin(), t.async_group_ends.begin() + retire);
  async_complete(t, n_copies);
}

// cp.async.wait_all: commit, then wait for everything.
inline void async_wait_all(Thread& t) {
  t.async_group_ends.clear();
  async_complete(t, t.async_copies.size());
}

}  // namespace dg::emu
