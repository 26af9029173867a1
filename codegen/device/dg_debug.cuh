// Device debug mode: what a kernel compiled with DG_DEVICE_DEBUG does where it would otherwise
// hang or compute garbage without a word: it prints what went wrong and traps.
//
// Note [Device debug mode]
// A wrong mbarrier parity hangs a GPU silently, and a misplaced 128-byte-swizzled tile reads the
// wrong bytes without a fault. With DYNGEN_DEVICE_DEBUG=1 the runtime compiles every kernel, for
// NVRTC and for the host emulation alike, with -DDG_DEVICE_DEBUG (runtime/binary_key.cc), and the
// flag is part of the binary's cache key, so debug and normal binaries never share an entry. Then:
// - Every mbarrier wait (dg_mbarrier_wait_parity, the one spin loop of the generated kernels) gives
//   up after DG_DEVICE_DEBUG_POLLS polls of try_wait: it prints which wait (the name its caller
//   gave, the barrier's shared-window address, the parity it waited for), the block and the
//   thread, and traps. The bound counts polls, not time, so a context switched out never trips it.
// - dg_dynamic_smem checks that dynamic shared memory starts on a 1024-byte boundary of the
//   shared window, which the 128-byte swizzle of TMA and wgmma assumes (Note [wgmma layouts]).
// On a GPU the message goes through printf (flushed at the next synchronization; the runtime
// synchronizes after every launch in this mode, so the launch's error names the kernel) and
// __trap() fails the launch. Under the host emulation the same message is the launch's error,
// after the kernel's name; the emulation traps at the same bound, or as soon as every thread of the
// block waits (a deadlock, which no further poll can end).
// A debug build is slower and differently timed: each poll suspends about a microsecond
// (DG_DEVICE_DEBUG_SUSPEND_NS), and ptxas serializes the wgmmas of a kernel with the trap's call in
// it (its C7510 note). Off, none of this is compiled: the wait is the bare try_wait loop and its
// name argument is dropped, so the SASS is the same (tests/emu/device_debug_sass_test.cc).
#pragma once
#include "dg_config.cuh"

#if defined(DG_HAS_DEVICE) && defined(DG_DEVICE_DEBUG)

// The message of a wait past its bound: the wait's name, shared-window address, parity, polls,
// then the block and thread.
#define DG_DEBUG_WAIT_MESSAGE                                                                  \
  "dyngen device debug: mbarrier wait '%s' (shared address %u, parity %u) not complete after " \
  "%u polls, block (%u,%u,%u) thread (%u,%u,%u): trap\n"

// The message of misaligned dynamic shared memory: its shared-window address, block, thread.
#define DG_DEBUG_SMEM_MESSAGE                                                                     \
  "dyngen device debug: dynamic shared memory starts at shared address %u, not on the 1024-byte " \
  "boundary the 128-byte swizzle needs, block (%u,%u,%u) thread (%u,%u,%u): trap\n"

// printf(format, args..., block, thread), then __trap(); under the emulation, the formatted text
// ends the launch as its error (dg_emu_builtins.h).
#if defined(DG_ON_GPU)
#define DG_DEBUG_TRAP(format, ...)                                                            \
  do {                                                                                        \
    printf(format, __VA_ARGS__, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, \
           threadIdx.z);                                                                      \
    __trap();                                                                                 \
  } while (0)
#else
#define DG_DEBUG_TRAP(format, ...)                                                            \
  ::dg::emu::debug_trap(format, __VA_ARGS__, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, \
                        threadIdx.y, threadIdx.z)
#endif

// The shared-window address of a shared-memory pointer (the emulation's window: Note [Emulated
// shared window] in dg_emu_smem.h).
DG_DEVICE unsigned dg_debug_smem_address(const void* p) {
#if defined(DG_ON_GPU)
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
#else
  return ::dg::emu::smem_window_address(p);
#endif
}

// A wait of `polls` polls on the barrier at `bar` for `parity` has not completed: message, trap.
// Out of line on a GPU, so the bounded loop stays small.
static __device__ __noinline__ void dg_debug_wait_timeout(const char* what, const void* bar,
                                                          unsigned parity, unsigned polls) {
  DG_DEBUG_TRAP(DG_DEBUG_WAIT_MESSAGE, what, dg_debug_smem_address(bar), parity, polls);
}

// Dynamic shared memory must start on a 1024-byte boundary of the shared window.
DG_DEVICE void dg_debug_check_dynamic_smem(const void* base) {
  const unsigned address = dg_debug_smem_address(base);
  if (address % 1024u != 0) DG_DEBUG_TRAP(DG_DEBUG_SMEM_MESSAGE, address);
}

#endif  // DG_HAS_DEVICE && DG_DEVICE_DEBUG
