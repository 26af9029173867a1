// Host-emulation prelude: force-included (-include dg_emu.h) when a generated CUDA source is
// compiled by the host C++ compiler with -DDG_HOST_EMULATION. It supplies CUDA's keywords, built-in
// variables and functions, and a self-contained execution engine, so the very same source that
// NVRTC compiles for a GPU runs on the CPU. See DESIGN.md, "CPU execution (host emulation)".
#pragma once

#ifndef DG_HOST_EMULATION
#define DG_HOST_EMULATION 1
#endif

// Everything from the standard library comes in before the keyword macros below exist.
#include "dg_emu_abi.h"
#include "dg_emu_async.h"
#include "dg_emu_builtins.h"
#include "dg_emu_engine.h"
#include "dg_emu_launch.h"
#include "dg_emu_options.h"
#include "dg_emu_proxy.h"
#include "dg_emu_racecheck.h"
#include "dg_emu_sched.h"
#include "dg_emu_smem.h"
#include "dg_emu_types.h"

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__  // each emulated thread gets its own copy of every parameter anyway
// __restrict__ is a GCC and Clang keyword already.

// Note [Shared memory as thread_local]
// `__shared__ T x[N];` becomes `static thread_local T x[N];`.
// All fibers of a block run on one OS thread and an OS thread runs one block at a time, so a
// thread_local static is exactly one copy per block in flight: shared by the block's threads,
// private from blocks on other workers. Like CUDA shared memory it is not reset between blocks
// (Note [Poisoned shared memory]: each block finds it filled with 0xff bytes). `extern __shared__`
// cannot work this way; dynamic shared memory goes through DG_DYNAMIC_SMEM (dg_sync.cuh).
#define __shared__ static thread_local

// Built-in variables of the current emulated thread (Note [Warp collectives] for lanes).
#define threadIdx (::dg::emu::t_emu.thread->tid)
#define blockIdx (::dg::emu::t_emu.block->block_idx)
#define blockDim (::dg::emu::t_emu.block->block_dim)
#define gridDim (::dg::emu::t_emu.block->grid_dim)
inline constexpr int warpSize = 32;
