// Tensor-core primitives: mma.sync m16n8k16 (bf16 in, f32 accumulate) and ldmatrix. One interface,
// two implementations: inline PTX on a GPU, and on the host a twin (dg_mma_sm80_emu.h) that follows
// the PTX ISA's fragment layouts exactly (Note [Warp collectives] in runtime/emu/dg_emu_engine.h).
//
// Note [mma fragment layouts]
// (PTX ISA, "Matrix Fragments for mma.m16n8k16", bf16). With
// g = lane / 4 and t = lane % 4, each lane holds, low half of a register first:
//   A (16x16, row-major) a[4]: a[0] = A[g][2t..2t+1]    a[1] = A[g+8][2t..2t+1]
//                              a[2] = A[g][2t+8..2t+9]  a[3] = A[g+8][2t+8..2t+9]
//   B (16x8, "col": k-major)  b[2]: b[0] = B[2t..2t+1][g]  b[1] = B[2t+8..2t+9][g]
//   C, D (16x8 f32)         c[4]: c[0..1] = C[g][2t..2t+1]  c[2..3] = C[g+8][2t..2t+1]
// ldmatrix .x4: lanes 8j..8j+7 give the addresses of the 8 rows (8 bf16 = 16 bytes each, 16-byte
// aligned, shared memory) of matrix j; register r[j] of lane l gets row l/4, elements 2(l%4) and
// 2(l%4)+1 of matrix j. With .trans it gets column l/4, rows 2(l%4) and 2(l%4)+1 instead.
// Hence an A tile at As[16][ld] loads with lane l pointing at &As[l % 16][(l / 16) * 8] (no trans),
// a B tile stored n-major (Bt[n][k], a weight [N][K]) at &Bt[(l / 16) * 8 + l % 8][((l / 8) % 2) *
// 8] giving b[0], b[1] of n-tile 0 in r[0], r[1] and of n-tile 1 in r[2], r[3]; a B tile stored
// k-major (B[k][n]) loads the same registers with .trans from &B[(l / 8 % 2) * 8 + l % 8][(l / 16)
// * 8].
#pragma once
#include "dg_config.cuh"
#include "dg_types.cuh"

#if defined(DG_HOST_EMULATION)
#include "dg_mma_sm80_emu.h"  // the host twin
#endif

// d = a * b + c over a 16x8x16 tile; a warp-wide collective (all 32 lanes). d may alias c.
DG_DEVICE void dg_mma_m16n8k16_bf16(float (&d)[4], const dg_u32 (&a)[4], const dg_u32 (&b)[2],
                                    const float (&c)[4]) {
#if defined(DG_ON_GPU)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#else
  ::dg::emu::require_full_warp("mma.sync");
  ::dg::emu::LaneSlot& s = ::dg::emu::my_lane_slot();
  for (int i = 0; i < 4; ++i) s.in[i] = a[i];
  s.in[4] = b[0];
  s.in[5] = b[1];
  for (int i = 0; i < 4; ++i) s.in[6 + i] = dg_float_as_bits(c[i]);
  ::dg::emu::warp_collective(0xffffffffu, &::dg::emu::mma_m16n8k16_bf16_op);
  for (int i = 0; i < 4; ++i) d[i] = dg_bits_as_float(static_cast<dg_u32>(s.out[i]));
#endif
}

// ldmatrix.sync.aligned.m8n8.x4.shared.b16: this lane supplies one row address (see the Note).
DG_DEVICE void dg_ldmatrix_x4(dg_u32 (&r)[4], const void* smem_row) {
#if defined(DG_ON_GPU)
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  ::dg::emu::ldmatrix_x4<false>(r, smem_row);
#endif
}

// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16.
DG_DEVICE void dg_ldmatrix_x4_trans(dg_u32 (&r)[4], const void* smem_row) {
#if defined(DG_ON_GPU)
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  ::dg::emu::ldmatrix_x4<true>(r, smem_row);
#endif
}
