// mbarrier (sm_80+, transaction counts sm_90) and fence.proxy.async: the synchronization of
// Hopper's asynchronous pipelines, where a TMA copy completes bytes on a barrier that consumers
// wait on by phase parity. Inline PTX on a GPU, and on the host a twin (dg_mbarrier_sm90_emu.h)
// that follows the PTX ISA's semantics (Note [mbarrier semantics]).
//
// Note [mbarrier semantics]
// (PTX ISA 9.7.13.15, "Parallel Synchronization and Communication
// Instructions: mbarrier": its phases, pending arrival count, tx-count and phase completion):
// - init(count) starts phase 0 expecting `count` arrivals and a tx-count of 0.
// - arrive counts one arrival; arrive.expect_tx(b) first adds b to the tx-count; complete_tx(b)
//   (what an asynchronous copy does as its bytes land) subtracts b. The tx-count may go below zero
//   in between (bytes landing before they are expected).
// - The current phase completes when its pending arrivals reach 0 and its tx-count is 0; the
//   next phase starts expecting `count` arrivals again.
// - try_wait.parity(P) is true when the phase of parity P has completed, that is when the
//   current phase's parity is not P: waiting on parity 0 waits for phase 0, then parity 1 for
//   phase 1, and so on.
// The emulation keeps the state in the barrier's own 8 bytes (opaque on a GPU): bits 0-19 the
// pending arrivals, 20-39 the expected count, 40-60 the tx-count (21-bit two's complement), 61
// the phase parity, 62-63 a marker (binary 10) that poisoned shared memory (all ones) lacks, so
// using a barrier before its init is an error. So are more arrivals than a phase expects, counts
// out of range, and a wait that cannot complete because every other thread waits too (a
// deadlock, reported after kDeadlockPolls polls without any barrier changing; with
// DG_DEVICE_DEBUG, as the trap of Note [Device debug mode]).
#pragma once
#include "dg_config.cuh"
#include "dg_debug.cuh"
#include "dg_types.cuh"

#if defined(DG_HOST_EMULATION)
#include "dg_mbarrier_sm90_emu.h"  // the host twin
#endif

#if defined(DG_HAS_DEVICE)

// mbarrier.init.shared::cta.b64: phase 0 expects `count` arrivals. Make the init visible to the
// other threads (a __syncthreads) before they use the barrier.
DG_DEVICE void dg_mbarrier_init(dg_u64* bar, unsigned count) {
#if defined(DG_ON_GPU)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(bar))),
               "r"(count)
               : "memory");
#else
  ::dg::emu::mbarrier_init(bar, count);
#endif
}

// fence.mbarrier_init.release.cluster: the inits before it are visible to the async proxy (TMA
// completing bytes on them); a __syncthreads after it makes them visible to the other threads.
DG_DEVICE void dg_fence_barrier_init() {
#if defined(DG_ON_GPU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// mbarrier.arrive: one arrival on the current phase.
DG_DEVICE void dg_mbarrier_arrive(dg_u64* bar) {
#if defined(DG_ON_GPU)
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(bar)))
               : "memory");
#else
  ::dg::emu::mbarrier_update(bar, 1, 0);
#endif
}

#if defined(DG_HOST_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)

// mbarrier.arrive.expect_tx: `bytes` more expected on the current phase, then one arrival.
DG_DEVICE void dg_mbarrier_arrive_expect_tx(dg_u64* bar, unsigned bytes) {
#if defined(DG_ON_GPU)
  asm volatile(
      "{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
          static_cast<unsigned>(__cvta_generic_to_shared(bar))),
      "r"(bytes)
      : "memory");
#else
  ::dg::emu::mbarrier_update(bar, 1, bytes);
#endif
}

// mbarrier.complete_tx: `bytes` of the current phase have landed (what a TMA copy does itself).
DG_DEVICE void dg_mbarrier_complete_tx(dg_u64* bar, unsigned bytes) {
#if defined(DG_ON_GPU)
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(bar))),
               "r"(bytes)
               : "memory");
#else
  ::dg::emu::mbarrier_update(bar, 0, -static_cast<int64_t>(bytes));
#endif
}

// mbarrier.try_wait.parity: whether the phase of parity `parity` has completed.
DG_DEVICE bool dg_mbarrier_try_wait_parity(dg_u64* bar, unsigned parity) {
#if defined(DG_ON_GPU)
  unsigned done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, "
      "0, p;\n}\n"
      : "=r"(done)
      : "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), "r"(parity)
      : "memory");
  return done != 0;
#else
  const bool done = ::dg::emu::mbarrier_phase(bar) != (parity & 1u);
  if (!done) ::dg::emu::yield_now();  // a polling loop lets the others run
  return done;
#endif
}

#if defined(DG_ON_GPU) && defined(DG_DEVICE_DEBUG)
// try_wait.parity that suspends the thread for at most about a microsecond, so that the debug
// bound of DG_DEVICE_DEBUG_POLLS polls is seconds at most, whatever the system's default limit.
DG_DEVICE bool dg_mbarrier_try_wait_parity_bounded(dg_u64* bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, "
      "1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), "r"(parity),
        "n"(DG_DEVICE_DEBUG_SUSPEND_NS)
      : "memory");
  return done != 0;
}
#endif

// Blocks until the phase of parity `parity` has completed. `what` names the wait (the barrier
// and its role, e.g. "full"): with DG_DEVICE_DEBUG a wait past its bound reports it and traps
// (Note [Device debug mode]); without, it is unused and costs nothing.
DG_DEVICE void dg_mbarrier_wait_parity(dg_u64* bar, unsigned parity,
                                       const char* what = "mbarrier") {
#if defined(DG_ON_GPU) && defined(DG_DEVICE_DEBUG)
  for (unsigned polls = 1; !dg_mbarrier_try_wait_parity_bounded(bar, parity); ++polls)
    if (polls == DG_DEVICE_DEBUG_POLLS) dg_debug_wait_timeout(what, bar, parity, polls);
#elif defined(DG_ON_GPU)
  (void)what;
  while (!dg_mbarrier_try_wait_parity(bar, parity)) {
  }
#else
  ::dg::emu::mbarrier_wait(bar, parity, what);
#endif
}

// fence.proxy.async.shared::cta: this thread's shared-memory writes through ordinary stores are
// ordered before later reads by the async proxy (wgmma operands, TMA stores). The emulation keeps
// the async proxy's view of dynamic shared memory apart (Note [Async proxy] in dg_emu_proxy.h):
// the fence brings it up to date.
DG_DEVICE void dg_fence_proxy_async() {
#if defined(DG_ON_GPU)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
  ::dg::emu::fence_proxy_async();
#endif
}

#endif  // sm_90 or emulation
#endif  // DG_HAS_DEVICE
