// cp.async under host emulation: per-thread queues of copies and commit groups, landed at issue,
// at a random later point, or at the wait that retires them (DYNGEN_EMU_ASYNC).
#pragma once
#include <cstdint>
#include <cstring>

#include "dg_emu_engine.h"
#include "dg_emu_racecheck.h"

namespace dg::emu {

// Note [Deferred cp.async]
// Cp.async copies are queued per thread with their commit groups; a
// wait_group (or wait_all, or the thread's exit) retires groups, performing any copy of them that
// has not landed yet. When a copy lands is DYNGEN_EMU_ASYNC's choice: `wait` (the default) at the
// retiring wait, so reading shared memory before the matching wait sees stale data, as it may on
// a GPU; `issue` at once, so a copy overwrites a stage that other threads still read (a missing
// barrier before a prefetch shows); `random` at issue one time in four, else at a scheduler step
// drawn from the next 4 x threads-per-block steps (the retiring wait lands whatever is left), so
// both kinds of bug show under some seeds. The source is read when the copy lands.
inline constexpr size_t kLandingWheel = 8192;  // > 4 x 1024 steps: no landing wraps around

inline void perform_copy(AsyncCopy& c) {
  std::memcpy(c.dst, c.src, c.src_bytes);
  std::memset(static_cast<char*>(c.dst) + c.src_bytes, 0, c.bytes - c.src_bytes);
  c.landed = true;
}

inline void async_copy(void* dst, const void* src, uint32_t bytes, uint32_t src_bytes) {
  Block& b = *t_emu.block;
  Thread& t = *t_emu.thread;
  if (!b.race.empty()) race_async_issue(dst, bytes);
  AsyncCopy c{dst, src, bytes, src_bytes, false};
  if (b.opts->async == AsyncMode::kIssue) {
    perform_copy(c);
  } else if (b.opts->async == AsyncMode::kRandom) {
    const uint64_t r = next_random(b);
    if ((r & 3) == 0) {
      perform_copy(c);
    } else {
      const uint64_t delay = 1 + (r >> 2) % (4 * uint64_t{b.n_threads});
      b.landings[(b.step + delay) % kLandingWheel].push_back(
          AsyncLanding{t.linear, t.async_base_seq + t.async_copies.size()});
    }
  }
  t.async_copies.push_back(c);
  maybe_yield();
}

// DYNGEN_EMU_ASYNC=random: lands the copies due at the scheduler's current step (those retired
// meanwhile are gone from their thread's queue and skipped).
inline void land_due_copies(Block& b) {
  std::vector<AsyncLanding>& due = b.landings[b.step % kLandingWheel];
  for (const AsyncLanding& l : due) {
    Thread& t = b.threads[l.thread];
    if (l.seq < t.async_base_seq) continue;
    const uint64_t i = l.seq - t.async_base_seq;
    if (i < t.async_copies.size() && !t.async_copies[i].landed) perform_copy(t.async_copies[i]);
  }
  due.clear();
}

inline void async_commit() {
  t_emu.thread->async_group_ends.push_back(t_emu.thread->async_copies.size());
  maybe_yield();
}

// Retires t's oldest n_copies copies.
inline void async_complete(Thread& t, size_t n_copies) {
  Block& b = *t_emu.block;
  for (size_t i = 0; i < n_copies; ++i) {
    AsyncCopy& c = t.async_copies[i];
    if (!c.landed) perform_copy(c);
    if (!b.race.empty()) race_async_retire(b, t, c.dst, c.bytes);
  }
  t.async_copies.erase(t.async_copies.begin(), t.async_copies.begin() + n_copies);
  t.async_base_seq += n_copies;
  for (size_t& end : t.async_group_ends) end -= n_copies;
}

// cp.async.wait_group n: all but the newest n committed groups are complete.
inline void async_wait(unsigned n) {
  maybe_yield();
  Thread& t = *t_emu.thread;
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
