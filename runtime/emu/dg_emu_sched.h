// Scheduling for the host emulation: the fiber scheduler of one block, and the grid loop that
// spreads blocks over OS threads.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dg_emu_abi.h"
#include "dg_emu_async.h"
#include "dg_emu_engine.h"
#include "dg_emu_smem.h"

namespace dg::emu {

// The body of every fiber: run the kernel for this thread, then hand control back for good.
inline void thread_main(void* arg) {
  Thread* t = static_cast<Thread*>(arg);
  Block& b = *t_emu.block;
  b.body(b.body_arg);
  async_wait_all(*t);
  t->state = ThreadState::kExited;
  fiber_switch(&t->ctx, &b.sched);
  __builtin_unreachable();
}

// Shapes a worker's Block for a launch.
inline void prepare_block(Block& b, const DgEmuLaunch& cfg) {
  b.block_dim = dim3(cfg.block_x, cfg.block_y, cfg.block_z);
  b.grid_dim = dim3(cfg.grid_x, cfg.grid_y, cfg.grid_z);
  b.n_threads = cfg.block_x * cfg.block_y * cfg.block_z;
  b.threads.resize(b.n_threads);
  b.queue.resize(b.n_threads);
  for (unsigned i = 0; i < b.n_threads; ++i) {
    Thread& t = b.threads[i];
    t.linear = i;
    t.tid =
        uint3{i % cfg.block_x, (i / cfg.block_x) % cfg.block_y, i / (cfg.block_x * cfg.block_y)};
  }
  b.warps.resize((b.n_threads + 31) / 32);
  b.warp_epochs.assign(b.warps.size(), 0);
  for (size_t w = 0; w < b.warps.size(); ++w) {
    unsigned lanes = std::min(32u, b.n_threads - static_cast<unsigned>(w) * 32);
    b.warps[w].existing = lanes == 32 ? ~0u : (1u << lanes) - 1;
  }
}

// Note [Strict barriers]
// Every thread of a block must reach each __syncthreads(). PTX lets an
// exited thread release a barrier, but CUDA C++ calls a barrier in divergent code undefined, so
// the emulation counts all threads of the block: a barrier that exited threads will never reach
// leaves the others parked, the ready queue runs dry, and the launch fails with a deadlock message
// instead of hanging. Generated kernels predicate instead of returning early.
inline std::string deadlock_message(const Block& b) {
  unsigned at_bar = 0, at_warp = 0;
  for (const Thread& t : b.threads) {
    at_bar += t.state == ThreadState::kBlockBarrier;
    at_warp += t.state == ThreadState::kWarpCollective;
  }
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "deadlock in block (%u,%u,%u) of %u threads: %u wait at __syncthreads(), %u wait "
                "at a warp collective, %u have exited; a barrier that some threads never reach "
                "cannot complete",
                b.block_idx.x, b.block_idx.y, b.block_idx.z, b.n_threads, at_bar, at_warp,
                b.n_exited);
  return buf;
}

// Records a thread's exit; a lane parked at a collective that names it can never proceed.
inline void on_thread_exit(Block& b, Thread& t) {
  ++b.n_exited;
  b.free_stacks.push_back(t.stack);
  Warp& w = b.warps[t.linear >> 5];
  uint32_t bit = 1u << (t.linear & 31);
  w.exited |= bit;
  auto exit_error = [&](const char* what) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "block (%u,%u,%u): thread %u exited %s", b.block_idx.x,
                  b.block_idx.y, b.block_idx.z, t.linear, what);
    b.error = buf;
  };
  if (!w.mma_pending.empty()) {  // its accumulator registers would be written after it is gone
    exit_error("with a wgmma.mma_async not yet retired by wgmma.wait_group");
    return;
  }
  for (uint32_t m = w.arrived; m; m &= m - 1) {
    if (w.lane[__builtin_ctz(m)].mask & bit) {
      exit_error("while lanes of its warp wait for it at a warp collective");
      return;
    }
  }
}

// Note [Block scheduler]
// A block runs start to finish on one worker. The worker's own context is
// the scheduler: it pops a ready thread, switches to its fiber, and gets control back when the
// thread parks (barrier or warp collective), exits or fails. Whoever completes a barrier readies
// the parked threads; when nothing is ready the block is either done or deadlocked. Every handoff
// goes through the scheduler, so an exiting fiber never has its stack reused under it. A thread
// that never parks costs one fiber start and two switches (tens of nanoseconds).
//
// Note [Adversarial emulation]
// A GPU runs warps in an order nothing promises, and cp.async
// copies land whenever they like before their wait, so a kernel that is right only in one order
// is wrong. The emulation can look for such kernels:
// - DYNGEN_EMU_SCHED=random: the scheduler takes a ready thread at random instead of the oldest,
//   the last thread to reach a __syncthreads or a warp collective goes back to the ready set
//   instead of going on at once, and cp.async issue, commit and wait are preemption points (one
//   time in four), so warps drift apart instead of staying in near lock-step.
// - DYNGEN_EMU_ASYNC=wait|issue|random: when a cp.async lands (Note [Deferred cp.async]).
// - DYNGEN_EMU_SEED=N: the random modes' seed. Each block's stream is a function of the seed and
//   the block index only, so a run is reproducible whatever worker runs which block. Every launch
//   failure message ends with the settings that reproduce it.
// - DYNGEN_EMU_RACECHECK=1: the shared-memory race detector (Note [Race detector]).
// - DYNGEN_EMU_SMEM_OFFSET=N: dynamic shared memory at window address N, a multiple of 16 that
//   need not be one of 1024 (Note [Emulated shared window]).
// - Always: shared memory is poisoned per block (Note [Poisoned shared memory]), ldmatrix and
//   cp.async addresses are checked to be shared memory, and lanes must meet at warp collectives
//   from the same call site (Note [Warp collectives]).
// The defaults (fifo, wait) are the fastest; CI runs the GEMM, catalog and seed tests under random
// modes with fixed seeds (tests/emu/CMakeLists.txt).
// Runs every thread of the block in b.block_idx to completion. False (with b.error) on failure.
// One block on this worker, to its end (Note [Block scheduler]).
inline bool run_block(Block& b) {
  const uint64_t linear_block =
      b.block_idx.x +
      uint64_t{b.grid_dim.x} * (b.block_idx.y + uint64_t{b.grid_dim.y} * b.block_idx.z);
  b.rng = b.opts->seed * 0x2545f4914f6cdd1dull + linear_block * 0x9e3779b97f4a7c15ull;
  const bool random = b.opts->sched == SchedMode::kRandom;
  const bool landings = b.opts->async == AsyncMode::kRandom;
  b.q_head = 0;
  b.q_size = 0;
  b.n_exited = 0;
  b.race_epoch_base += b.bar_generation + 1;
  b.bar_arrived = b.bar_generation = 0;
  b.bar_count[0] = b.bar_count[1] = 0;
  for (Warp& w : b.warps) {
    w.arrived = w.exited = 0;
    w.mma_pending.clear();
    w.mma_group_ends.clear();
    w.mma_fenced = false;
    w.maxnreg_done = w.maxnreg_parked = 0;
  }
  b.bulk_pending.clear();
  for (Thread& t : b.threads) {
    t.started = false;
    t.async_copies.clear();
    t.async_group_ends.clear();
    push_ready(b, t);
  }
  while (b.q_size > 0) {
    if (landings) land_due_copies(b);
    ++b.step;
    if (random && b.q_size > 1) {
      const size_t pick = (b.q_head + next_random(b) % b.q_size) % b.n_threads;
      std::swap(b.queue[pick], b.queue[b.q_head]);
    }
    Thread& t = b.threads[b.queue[b.q_head]];
    b.q_head = (b.q_head + 1) % b.n_threads;
    --b.q_size;
    if (!t.started) {
      if (b.free_stacks.empty()) {
        b.free_stacks.push_back(StackPool::instance().acquire(b.opts->stack_bytes));
      }
      t.stack = b.free_stacks.back();
      b.free_stacks.pop_back();
      fiber_init(&t.ctx, t.stack.lo, t.stack.size, &thread_main, &t);
      t.started = true;
    }
    t_emu.thread = &t;
    fiber_switch(&b.sched, &t.ctx);
    t_emu.thread = nullptr;
    if (t.state == ThreadState::kExited) on_thread_exit(b, t);
    if (!b.error.empty()) break;
  }
  if (b.error.empty() && b.n_exited != b.n_threads) b.error = deadlock_message(b);
  if (b.error.empty() && !b.bulk_pending.empty())
    b.error = "block ended with a TMA copy whose mbarrier no thread waited on";
  if (b.error.empty()) return true;
  // Abandon the parked fibers; their stacks go back to the free list.
  for (Thread& t : b.threads) {
    if (t.started && t.state != ThreadState::kExited) b.free_stacks.push_back(t.stack);
    t.started = false;
  }
  return false;
}

// State shared by the workers of one launch.
struct GridRun {
  Options opts;
  const DgEmuLaunch* cfg;
  void (*body)(void*);
  void* body_arg;
  uint64_t n_blocks;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string error;

  void record(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty()) error = message;
    failed = true;
  }
};

// One OS thread's share of a grid: takes blocks from the shared counter until none are left.
inline void run_worker(GridRun& run) {
  Block b;
  const DgEmuLaunch& cfg = *run.cfg;
  unsigned char* smem = nullptr;
  try {
    b.opts = &run.opts;
    prepare_block(b, cfg);
    b.body = run.body;
    b.body_arg = run.body_arg;
    b.dyn_smem_bytes = cfg.dynamic_smem_bytes;
    size_t alloc = (std::max<size_t>(cfg.dynamic_smem_bytes, 16) + 127) & ~size_t{127};
    smem = static_cast<unsigned char*>(::operator new (alloc, std::align_val_t{128}));
    b.dyn_smem = smem;
    b.dyn_window = run.opts.smem_offset;  // Note [Emulated shared window]
    t_emu.block = &b;
    if (std::string e = locate_static_smem(b); !e.empty()) throw std::runtime_error(e);
    if (run.opts.async == AsyncMode::kRandom) b.landings.resize(kLandingWheel);
    if (run.opts.racecheck) b.race.assign(b.dyn_smem_bytes + b.static_smem_bytes, RaceByte{});
    while (!run.failed.load(std::memory_order_relaxed)) {
      uint64_t i = run.next.fetch_add(1, std::memory_order_relaxed);
      if (i >= run.n_blocks) break;
      b.block_idx = uint3{static_cast<unsigned>(i % cfg.grid_x),
                          static_cast<unsigned>((i / cfg.grid_x) % cfg.grid_y),
                          static_cast<unsigned>(i / (uint64_t{cfg.grid_x} * cfg.grid_y))};
      // Note [Poisoned shared memory].
      std::memset(smem, 0xff, cfg.dynamic_smem_bytes);
      std::memset(b.static_smem, 0xff, b.static_smem_bytes);
      b.async_view_live = false;  // the async proxy sees the poison too (Note [Async proxy])
      if (!run_block(b)) {
        run.record(b.error);
        break;
      }
    }
  } catch (const std::runtime_error& e) {
    run.record(e.what());
  } catch (const std::exception& e) {
    run.record(std::string("emulation failure: ") + e.what());
  }
  t_emu.block = nullptr;
  if (smem != nullptr) ::operator delete (smem, std::align_val_t{128});
  StackPool::instance().release(b.free_stacks.data(), b.free_stacks.size());
}

// Runs a grid; body() runs the kernel for the current thread. Returns "" or an error message,
// which names the emulation settings that reproduce it.
inline std::string run_grid_with(const Options& opts, const DgEmuLaunch& cfg, void (*body)(void*),
                                 void* body_arg);

inline std::string run_grid(const DgEmuLaunch& cfg, void (*body)(void*), void* body_arg) {
  const Options opts = read_options();
  if (!opts.error.empty()) return opts.error;
  std::string error = run_grid_with(opts, cfg, body, body_arg);
  if (!error.empty()) error += " [" + opts.describe() + "]";
  return error;
}

inline std::string run_grid_with(const Options& opts, const DgEmuLaunch& cfg, void (*body)(void*),
                                 void* body_arg) {
  if (t_emu.block != nullptr) return "a kernel launch from inside an emulated kernel";
  if (cfg.grid_x == 0 || cfg.grid_y == 0 || cfg.grid_z == 0 || cfg.block_x == 0 ||
      cfg.block_y == 0 || cfg.block_z == 0)
    return "invalid launch: a grid or block dimension is 0";
  if (cfg.grid_y > 65535 || cfg.grid_z > 65535 || cfg.block_z > 64)
    return "invalid launch: grid y/z above 65535 or block z above 64";
  if (uint64_t{cfg.block_x} * cfg.block_y * cfg.block_z > 1024)
    return "invalid launch: more than 1024 threads per block";
  GridRun run;
  run.opts = opts;
  run.cfg = &cfg;
  run.body = body;
  run.body_arg = body_arg;
  run.n_blocks = uint64_t{cfg.grid_x} * cfg.grid_y * cfg.grid_z;
  unsigned n_workers = static_cast<unsigned>(std::min<uint64_t>(opts.threads, run.n_blocks));
  std::vector<std::thread> helpers;
  try {
    for (unsigned i = 1; i < n_workers; ++i) helpers.emplace_back([&run] { run_worker(run); });
  } catch (const std::exception& e) {
    run.record(std::string("cannot start emulation threads: ") + e.what());
  }
  run_worker(run);
  for (std::thread& h : helpers) h.join();
  return run.error;
}

}  // namespace dg::emu
