// Host twin of cp.async (dg_cp_async_sm80.cuh): the checks a GPU makes of a copy's addresses;
// the copies themselves are the engine's (Note [Deferred cp.async] in
// runtime/emu/dg_emu_engine.h). dg_cp_async_sm80.cuh includes this file under DG_HOST_EMULATION
// only; the engine's types come from the force-included prelude, runtime/emu/dg_emu.h.
#pragma once
#if !defined(DG_HOST_EMULATION)
#error "dg_cp_async_sm80_emu.h is host emulation only: include dg_cp_async_sm80.cuh"
#endif

namespace dg::emu {
// The destination must be 16 bytes of shared memory and the source must not be shared memory.
inline void check_cp_async(void* dst, const void* src) {
  if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % 16 != 0)
    fail(where() + ": cp.async addresses must be 16-byte aligned");
  if (!in_smem(*t_emu.block, dst, 16))
    fail(where() + ": cp.async destination is not in shared memory");
  if (smem_index(*t_emu.block, src) >= 0) fail(where() + ": cp.async source is in shared memory");
}
}  // namespace dg::emu
