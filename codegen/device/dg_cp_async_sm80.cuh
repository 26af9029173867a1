// cp.async: 16-byte asynchronous copies from global to shared memory, grouped with commit_group
// and retired with wait_group (sm_80+). On the host the copies are queued and performed when
// their group is waited for (Note [Deferred cp.async] in runtime/emu/dg_emu_engine.h).
#pragma once
#include "dg_config.cuh"
#include "dg_types.cuh"

#if defined(DG_HOST_EMULATION)
#include "dg_cp_async_sm80_emu.h"  // the host twin
#endif

// cp.async.cg.shared.global [dst], [src], 16. Both addresses 16-byte aligned.
DG_DEVICE void dg_cp_async_16(void* smem_dst, const void* gmem_src) {
#if defined(DG_ON_GPU)
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src) : "memory");
#else
  ::dg::emu::check_cp_async(smem_dst, gmem_src);
  ::dg::emu::async_copy(smem_dst, gmem_src, 16, 16);
#endif
}

// As dg_cp_async_16 when `pred`; otherwise writes 16 zero bytes and does not read gmem_src (the
// src-size form of cp.async), for tiles that overhang a dynamic extent.
DG_DEVICE void dg_cp_async_16_zfill(void* smem_dst, const void* gmem_src, bool pred) {
#if defined(DG_ON_GPU)
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  const unsigned src_size = pred ? 16u : 0u;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
               "r"(src_size)
               : "memory");
#else
  ::dg::emu::check_cp_async(smem_dst, pred ? gmem_src : nullptr);
  ::dg::emu::async_copy(smem_dst, gmem_src, 16, pred ? 16u : 0u);
#endif
}

// A plain store of one bf16 into shared memory (the unaligned copies' fallback for cp.async). On
// the host the race detector sees it (Note [Race detector]), as it sees cp.async.
DG_DEVICE void dg_store_shared(dg_bf16* smem_dst, dg_bf16 v) {
#if defined(DG_HOST_EMULATION)
  if (!::dg::emu::t_emu.block->race.empty())
    ::dg::emu::race_write(smem_dst, sizeof v, ::dg::emu::kRaceStore);
#endif
  *smem_dst = v;
}

// cp.async.commit_group: the copies issued since the last commit form one group.
DG_DEVICE void dg_cp_async_commit() {
#if defined(DG_ON_GPU)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  ::dg::emu::async_commit();
#endif
}

// cp.async.wait_group N: all but the N most recent committed groups have landed.
template <int N>
DG_DEVICE void dg_cp_async_wait() {
#if defined(DG_ON_GPU)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#else
  ::dg::emu::async_wait(N);
#endif
}

// cp.async.wait_all: every copy issued by this thread has landed.
DG_DEVICE void dg_cp_async_wait_all() {
#if defined(DG_ON_GPU)
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#else
  ::dg::emu::async_wait_all(*::dg::emu::t_emu.thread);
#endif
}
