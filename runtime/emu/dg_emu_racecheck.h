// The shared-memory race detector of the host emulation (DYNGEN_EMU_RACECHECK=1), and the checks
// that an address is in shared memory.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include "dg_emu_engine.h"

namespace dg::emu {

// Note [Race detector]
// In the spirit of compute-sanitizer's racecheck. Every byte of shared
// memory (dynamic and static) has a shadow holding its last write and up to two readers of the
// latest barrier interval, each as (thread, interval, the warp's __syncwarp count). Two accesses
// conflict when they are by different threads in the same interval (no __syncthreads between)
// and at least one writes; within one warp they conflict only if no __syncwarp (nor other
// collective of the whole warp: shuffle, vote, ldmatrix, mma, which a warp executes converged)
// came between. A cp.async's write becomes visible at the wait only to the thread that issued it,
// so another lane still needs a __syncwarp or __syncthreads. A cp.async writes its destination at
// an unknown time between its issue and the cp.async.wait_group that retires it, so the detector
// checks it as a write at issue, marks the bytes "in flight" until the retiring wait (any access to
// them meanwhile, by any thread, is a race), and records it as a write of the issuing thread at
// that wait: another thread's read in the same interval is then a race (the missing barrier after
// the wait). The verdict depends only on the order of barriers and warp syncs, not on the schedule,
// so a race is reported under every DYNGEN_EMU_SCHED and seed. Intervals are numbered on from one
// block to the next on a worker, so the shadow of a finished block never conflicts with the next
// one and needs no reset. The detector sees cp.async (write), ldmatrix (read of each lane's row)
// and the accesses of device-layer code that reports them with race_read/race_write; plain loads
// and stores of shared memory in kernel code are not instrumented. The first race ends the launch
// with a message naming both threads and the address (the kernel is prefixed by the launch entry);
// blocks share no shared memory, so only threads of one block can race.
enum RaceKind : uint8_t { kRaceNone, kRaceStore, kRaceLoad, kRaceCpAsync, kRaceLdmatrix };

inline const char* race_kind_verb(uint8_t kind) {
  switch (kind) {
    case kRaceStore:
      return "wrote";
    case kRaceLoad:
      return "read";
    case kRaceCpAsync:
      return "wrote (cp.async)";
    case kRaceLdmatrix:
      return "read (ldmatrix)";
    default:
      return "accessed";
  }
}

// The offset of `p` in the block's race shadow (dynamic bytes first), or -1 outside shared memory.
inline long long smem_index(const Block& b, const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t d = reinterpret_cast<uintptr_t>(b.dyn_smem);
  if (b.dyn_smem != nullptr && a >= d && a < d + b.dyn_smem_bytes)
    return static_cast<long long>(a - d);
  const uintptr_t s = reinterpret_cast<uintptr_t>(b.static_smem);
  if (b.static_smem != nullptr && a >= s && a < s + b.static_smem_bytes)
    return static_cast<long long>(b.dyn_smem_bytes + (a - s));
  return -1;
}

// Whether [p, p + n) lies in one shared-memory region (dynamic or static) of the block.
inline bool in_smem(const Block& b, const void* p, size_t n) {
  const long long lo = smem_index(b, p);
  if (lo < 0 || n == 0) return lo >= 0;
  const long long hi = smem_index(b, static_cast<const char*>(p) + n - 1);
  return hi == lo + static_cast<long long>(n) - 1 &&
         (static_cast<size_t>(lo) >= b.dyn_smem_bytes) ==
             (static_cast<size_t>(hi) >= b.dyn_smem_bytes);
}

inline RaceAccess race_now(const Block& b, const Thread& t, uint8_t kind) {
  RaceAccess a;
  a.epoch = b.race_epoch_base + b.bar_generation + 1;
  a.warp_epoch = b.warp_epochs[t.linear >> 5];
  a.thread1 = static_cast<uint16_t>(t.linear + 1);
  a.kind = kind;
  return a;
}

inline bool concurrent(const RaceAccess& p, const RaceAccess& c) {
  if (p.thread1 == 0 || p.epoch != c.epoch || p.thread1 == c.thread1) return false;
  if (((p.thread1 - 1) >> 5) != ((c.thread1 - 1) >> 5)) return true;
  return p.warp_epoch == c.warp_epoch;
}

inline std::string race_thread(const Block& b, unsigned linear) {
  const uint3 t = b.threads[linear].tid;
  char buf[96];
  std::snprintf(buf, sizeof buf, "thread (%u,%u,%u) [warp %u lane %u]", t.x, t.y, t.z, linear >> 5,
                linear & 31);
  return buf;
}

inline std::string race_where(const Block& b, const void* p) {
  const long long i = smem_index(b, p);
  const bool dynamic = static_cast<size_t>(i) < b.dyn_smem_bytes;
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s shared memory offset %lld (address %p)",
                dynamic ? "dynamic" : "static",
                dynamic ? i : i - static_cast<long long>(b.dyn_smem_bytes), p);
  return buf;
}

// Ends the launch with the report of a conflict at `p` between `earlier` and `now`.
[[noreturn]] inline void race_report(const Block& b, const void* p, const RaceAccess& earlier,
                                     const RaceAccess& now, const char* what) {
  char head[96];
  std::snprintf(head, sizeof head, "shared-memory race in block (%u,%u,%u): ", b.block_idx.x,
                b.block_idx.y, b.block_idx.z);
  const bool same_warp = ((earlier.thread1 - 1) >> 5) == ((now.thread1 - 1) >> 5);
  fail(std::string(head) + race_thread(b, earlier.thread1 - 1u) + " " +
       race_kind_verb(earlier.kind) + " and " + race_thread(b, now.thread1 - 1u) + " " +
       race_kind_verb(now.kind) + " the byte at " + race_where(b, p) + " " + what +
       (same_warp ? " (same warp, no __syncwarp between)" : " (no __syncthreads between)"));
}

[[noreturn]] inline void race_in_flight(const Block& b, const void* p, uint16_t owner1,
                                        const RaceAccess& now) {
  char head[96];
  std::snprintf(head, sizeof head, "shared-memory race in block (%u,%u,%u): ", b.block_idx.x,
                b.block_idx.y, b.block_idx.z);
  fail(std::string(head) + race_thread(b, now.thread1 - 1u) + " " + race_kind_verb(now.kind) +
       " the byte at " + race_where(b, p) + " while a cp.async of " + race_thread(b, owner1 - 1u) +
       " to it is in flight (not yet retired by its cp.async.wait_group)");
}

// Records a read of [p, p + n) by the current thread; bytes outside shared memory are ignored.
inline void race_read(const void* p, size_t n, uint8_t kind) {
  Block& b = *t_emu.block;
  const RaceAccess now = race_now(b, *t_emu.thread, kind);
  for (size_t k = 0; k < n; ++k) {
    const char* q = static_cast<const char*>(p) + k;
    const long long i = smem_index(b, q);
    if (i < 0) continue;
    RaceByte& s = b.race[static_cast<size_t>(i)];
    if (s.async_owner1 != 0) race_in_flight(b, q, s.async_owner1, now);
    if (concurrent(s.write, now)) race_report(b, q, s.write, now, "in one barrier interval");
    // Keep two distinct readers of the latest interval: any writer differs from one of them.
    if (s.read[0].epoch != now.epoch) {
      s.read[0] = now;
      s.read[1] = RaceAccess{};
    } else if (s.read[0].thread1 == now.thread1) {
      s.read[0] = now;
    } else {
      s.read[1] = now;
    }
  }
}

inline void race_check_write(Block& b, const char* q, RaceByte& s, const RaceAccess& now) {
  if (s.async_owner1 != 0) race_in_flight(b, q, s.async_owner1, now);
  if (concurrent(s.write, now)) race_report(b, q, s.write, now, "in one barrier interval");
  for (const RaceAccess& r : s.read)
    if (concurrent(r, now)) race_report(b, q, r, now, "in one barrier interval");
}

// Records a write of [p, p + n) by the current thread.
inline void race_write(const void* p, size_t n, uint8_t kind) {
  Block& b = *t_emu.block;
  const RaceAccess now = race_now(b, *t_emu.thread, kind);
  for (size_t k = 0; k < n; ++k) {
    const char* q = static_cast<const char*>(p) + k;
    const long long i = smem_index(b, q);
    if (i < 0) continue;
    RaceByte& s = b.race[static_cast<size_t>(i)];
    race_check_write(b, q, s, now);
    s.write = now;
  }
}

// A cp.async to [dst, dst + n) issued by the current thread.
inline void race_async_issue(void* dst, size_t n) {
  Block& b = *t_emu.block;
  Thread& t = *t_emu.thread;
  const RaceAccess now = race_now(b, t, kRaceCpAsync);
  for (size_t k = 0; k < n; ++k) {
    const char* q = static_cast<const char*>(dst) + k;
    const long long i = smem_index(b, q);
    if (i < 0) continue;
    RaceByte& s = b.race[static_cast<size_t>(i)];
    race_check_write(b, q, s, now);
    s.write = now;
    s.async_owner1 = now.thread1;
  }
}

// The wait that retires t's cp.async to [dst, dst + n): the write happens now, as far as other
// threads can tell.
inline void race_async_retire(Block& b, const Thread& t, void* dst, size_t n) {
  const RaceAccess now = race_now(b, t, kRaceCpAsync);
  for (size_t k = 0; k < n; ++k) {
    const long long i = smem_index(b, static_cast<const char*>(dst) + k);
    if (i < 0) continue;
    RaceByte& s = b.race[static_cast<size_t>(i)];
    if (s.async_owner1 == now.thread1) s.async_owner1 = 0;
    s.write = now;
  }
}

}  // namespace dg::emu
