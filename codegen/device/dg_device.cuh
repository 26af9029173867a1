// The dyngen device layer: every generated kernel starts with #include "dg_device.cuh". Compiles
// under NVRTC (sm_80+) and, with -DDG_HOST_EMULATION and the dg_emu.h prelude, on the host.
// Outside both, only the scalar types and conversions are available.
#pragma once
#include "dg_config.cuh"
#include "dg_types.cuh"

#if defined(DG_HAS_DEVICE)
#include "dg_cp_async_sm80.cuh"
#include "dg_gemm_sm80.cuh"
#include "dg_mma_sm80.cuh"
#include "dg_sync.cuh"
#endif
