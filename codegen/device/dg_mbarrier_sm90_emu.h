// Host twin of mbarrier (dg_mbarrier_sm90.cuh): the barrier's state kept in its own 8 bytes, as
// Note [mbarrier semantics] describes. dg_mbarrier_sm90.cuh includes this file under
// DG_HOST_EMULATION only; the engine's types come from the force-included prelude,
// runtime/emu/dg_emu.h.
#pragma once
#if !defined(DG_HOST_EMULATION)
#error "dg_mbarrier_sm90_emu.h is host emulation only: include dg_mbarrier_sm90.cuh"
#endif

namespace dg::emu {

struct MbarrierState {
  int64_t pending, expected, tx;
  unsigned phase;
};

constexpr dg_u64 kMbarrierMarker = dg_u64{2} << 62;
constexpr int64_t kMbarrierMaxCount = (int64_t{1} << 20) - 1;

inline void check_mbarrier_address(const dg_u64* bar) {
  if (!in_smem(*t_emu.block, bar, 8) || reinterpret_cast<uintptr_t>(bar) % 8 != 0)
    fail(where() + ": an mbarrier must be 8 aligned bytes of shared memory");
}

inline MbarrierState mbarrier_load(const dg_u64* bar) {
  check_mbarrier_address(bar);
  const dg_u64 v = *bar;
  if ((v >> 62) != 2) fail(where() + ": mbarrier used before mbarrier.init");
  int64_t tx = static_cast<int64_t>((v >> 40) & 0x1fffff);
  if (tx >= (int64_t{1} << 20)) tx -= int64_t{1} << 21;
  return {static_cast<int64_t>(v & 0xfffff), static_cast<int64_t>((v >> 20) & 0xfffff), tx,
          static_cast<unsigned>((v >> 61) & 1)};
}

// Stores `s`, completing the phase when nothing is pending (Note [mbarrier semantics]).
inline void mbarrier_store(dg_u64* bar, MbarrierState s) {
  if (s.pending < 0) fail(where() + ": more mbarrier arrivals than the phase expects");
  if (s.tx > kMbarrierMaxCount || s.tx < -kMbarrierMaxCount)
    fail(where() + ": mbarrier tx-count out of range");
  if (s.pending == 0 && s.tx == 0) {
    s.phase ^= 1u;
    s.pending = s.expected;
  }
  *bar = kMbarrierMarker | (dg_u64{s.phase} << 61) |
         ((static_cast<dg_u64>(s.tx) & 0x1fffff) << 40) | (static_cast<dg_u64>(s.expected) << 20) |
         static_cast<dg_u64>(s.pending);
  ++t_emu.block->mbarrier_changes;
}

inline void mbarrier_init(dg_u64* bar, unsigned count) {
  if (count < 1 || count > kMbarrierMaxCount) fail(where() + ": mbarrier.init count out of range");
  check_mbarrier_address(bar);
  mbarrier_store(bar, MbarrierState{count, count, 0, 0});  // phase 0, nothing arrived
}

inline void mbarrier_apply(dg_u64* bar, int64_t arrivals, int64_t tx_added) {
  MbarrierState s = mbarrier_load(bar);
  s.tx += tx_added;
  s.pending -= arrivals;
  mbarrier_store(bar, s);
}

inline void mbarrier_update(dg_u64* bar, int64_t arrivals, int64_t tx_added) {
  mbarrier_apply(bar, arrivals, tx_added);
  maybe_yield();
}

// The phase parity after landing the TMA copies that complete on `bar` (Note [TMA box copies]).
inline unsigned mbarrier_phase(dg_u64* bar) {
  if (t_emu.block->land_bulk != nullptr && !t_emu.block->bulk_pending.empty())
    t_emu.block->land_bulk(bar);
  return mbarrier_load(bar).phase;
}

// Note [mbarrier semantics]: a wait that sees no barrier of the block change over this many polls
// (each one a yield to every other ready thread) cannot complete.
constexpr uint64_t kDeadlockPolls = uint64_t{1} << 16;

// dg_mbarrier_wait_parity: `what` names the wait in the errors. With DG_DEVICE_DEBUG the wait
// traps as a GPU's does after DG_DEVICE_DEBUG_POLLS polls, or sooner when every thread waits
// (Note [Device debug mode] in dg_debug.cuh).
inline void mbarrier_wait(dg_u64* bar, unsigned parity, [[maybe_unused]] const char* what) {
  uint64_t seen = t_emu.block->mbarrier_changes, idle = 0;
  [[maybe_unused]] unsigned polls = 0;
  while (mbarrier_phase(bar) == (parity & 1u)) {
#if defined(DG_DEVICE_DEBUG)
    if (++polls == DG_DEVICE_DEBUG_POLLS) dg_debug_wait_timeout(what, bar, parity, polls);
#endif
    yield_now();
    const uint64_t now = t_emu.block->mbarrier_changes;
    idle = now == seen ? idle + 1 : 0;
    seen = now;
    if (idle > kDeadlockPolls) {
#if defined(DG_DEVICE_DEBUG)
      dg_debug_wait_timeout(what, bar, parity, polls);
#else
      fail(where() + ": mbarrier wait '" + what + "' on a phase that never completes (every " +
           "thread waits)");
#endif
    }
  }
}

}  // namespace dg::emu
