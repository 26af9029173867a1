// dyngen device layer: configuration shared by every dg_*.cuh. The device layer compiles three
// ways: as CUDA under NVRTC (DG_ON_GPU), as host C++ with the emulation prelude
// (DG_HOST_EMULATION, see runtime/emu/dg_emu.h), and as plain host C++, where only the scalar
// types and conversions of dg_types.cuh are available (the runtime and tests use those).
// Headers are named by architecture as in CuTe (dg_mma_sm80.cuh: mma.sync and ldmatrix, sm_80
// and later); a header with an instruction's PTX has its host twin, the emulation's
// implementation of that instruction, beside it (dg_mma_sm80_emu.h), included under
// DG_HOST_EMULATION only.
// No host headers are included on the GPU path: NVRTC has none.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define DG_ON_GPU 1
#endif

#if defined(DG_ON_GPU) && defined(DG_HOST_EMULATION)
#error "DG_HOST_EMULATION is for host compilers, not for NVRTC or nvcc"
#endif

// The emulation's compile force-includes its prelude (runtime/emu/dg_emu.h: CUDA's keywords and
// the engine the host twins, dg_*_emu.h, run on); the device layer never includes it.
#if defined(DG_HOST_EMULATION) && !defined(DG_EMU_ENTRY)
#error "DG_HOST_EMULATION needs the emulation prelude force-included (-include dg_emu.h)"
#endif

#if defined(DG_ON_GPU) || defined(DG_HOST_EMULATION)
#define DG_HAS_DEVICE 1  // threads, warps and shared memory exist
#define DG_DEVICE __device__ __forceinline__
#else
#define DG_DEVICE inline
#endif

// DG_DEVICE_DEBUG (the runtime's DYNGEN_DEVICE_DEBUG=1): bounded waits and device checks that
// print and trap (Note [Device debug mode] in dg_debug.cuh). A wait gives up after
// DG_DEVICE_DEBUG_POLLS polls, each suspending the thread for at most DG_DEVICE_DEBUG_SUSPEND_NS
// on a GPU; a compile may set either (-DDG_DEVICE_DEBUG_POLLS=N).
#if defined(DG_DEVICE_DEBUG)
#if !defined(DG_DEVICE_DEBUG_POLLS)
#define DG_DEVICE_DEBUG_POLLS (1u << 22)
#endif
#if !defined(DG_DEVICE_DEBUG_SUSPEND_NS)
#define DG_DEVICE_DEBUG_SUSPEND_NS 1000
#endif
#endif

// The code generator emits DG_EMU_ENTRY(kernel) after every kernel; it defines the host entry
// point under emulation (runtime/emu/dg_emu_launch.h) and nothing on a GPU.
#if !defined(DG_HOST_EMULATION)
#define DG_EMU_ENTRY(name)
#endif

// Full unrolling of a loop with a compile-time trip count (register-resident arrays on a GPU);
// nothing on the host, where -Wall would warn about an unknown pragma.
// DG_NO_UNROLL keeps a loop rolled (a rank-r epilogue loop, a weight-gradient staging loop:
// unrolled, their loads would compete with the accumulators for registers; the staging loops
// took 196 registers fully unrolled, Note [Weight-gradient staging] in dg_wgrad.cuh).
#if defined(DG_ON_GPU)
#define DG_UNROLL _Pragma("unroll")
#define DG_NO_UNROLL _Pragma("unroll 1")
#else
#define DG_UNROLL
#define DG_NO_UNROLL
#endif

typedef unsigned short dg_u16;
typedef unsigned int dg_u32;
typedef unsigned long long dg_u64;
