// 16-byte global loads widened to float, for the CUDA-core tiles that stage operands in shared
// memory (codegen/emit_rank_gemm.cc). One LDG.128 where the address allows it.
#pragma once
#include "dg_ops.cuh"

#if defined(DG_HAS_DEVICE)

// Note [16-byte operand loads]
// The code generator proves the static part of an operand's
// alignment (offsets and strides are multiples of the vector), but a caller's pointer may still
// sit off a 16-byte boundary (a view with a storage offset). `aligned` is the block-uniform
// run-time check of the base pointers; when it fails, the same elements are read one by one (and
// the host counts the launch: Note [Unaligned operands] in codegen/kernel_plan.h).
DG_DEVICE void dg_load16_float(float* out, const float* p, bool aligned) {
  if (aligned) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    out[0] = __uint_as_float(u.x);
    out[1] = __uint_as_float(u.y);
    out[2] = __uint_as_float(u.z);
    out[3] = __uint_as_float(u.w);
  } else {
    DG_UNROLL
    for (int i = 0; i < 4; ++i) out[i] = p[i];
  }
}

// bf16 -> f32 is exact: the bf16 bits are the float's high half.
DG_DEVICE void dg_load16_float(float* out, const dg_bf16* p, bool aligned) {
  if (aligned) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
    DG_UNROLL
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(w[i] << 16);
      out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
    DG_UNROLL
    for (int i = 0; i < 8; ++i) out[i] = dg_widen(p[i]);
  }
}

DG_DEVICE bool dg_aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}
#endif
