// Host twin of mma.sync m16n8k16 and ldmatrix .x4 (dg_mma_sm80.cuh): warp collectives that
// gather the 32 lanes' registers and follow the PTX ISA's fragment layouts
// (Note [mma fragment layouts]). dg_mma_sm80.cuh includes this file under DG_HOST_EMULATION
// only; the engine's types (LaneSlot, warp_collective, ...) come from the force-included prelude,
// runtime/emu/dg_emu.h.
#pragma once
#if !defined(DG_HOST_EMULATION)
#error "dg_mma_sm80_emu.h is host emulation only: include dg_mma_sm80.cuh"
#endif

namespace dg::emu {

inline float bf16_lo(uint64_t r) { return dg_bf16x2_lo(static_cast<dg_u32>(r)); }
inline float bf16_hi(uint64_t r) { return dg_bf16x2_hi(static_cast<dg_u32>(r)); }

// in[0..3] = a, in[4..5] = b, in[6..9] = c (float bits); out[0..3] = d (float bits).
inline void mma_m16n8k16_bf16_op(LaneSlot* lanes, uint32_t) {
  float a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const uint64_t* in = lanes[lane].in;
    const int g = lane >> 2, t = lane & 3;
    for (int half = 0; half < 2; ++half) {  // half 0: rows g, k 2t; half 1: rows g+8 / k 2t+8
      a[g + 8 * half][2 * t] = bf16_lo(in[half]);
      a[g + 8 * half][2 * t + 1] = bf16_hi(in[half]);
      a[g + 8 * half][2 * t + 8] = bf16_lo(in[2 + half]);
      a[g + 8 * half][2 * t + 9] = bf16_hi(in[2 + half]);
      b[2 * t + 8 * half][g] = bf16_lo(in[4 + half]);
      b[2 * t + 8 * half + 1][g] = bf16_hi(in[4 + half]);
      c[g + 8 * half][2 * t] = dg_bits_as_float(static_cast<dg_u32>(in[6 + 2 * half]));
      c[g + 8 * half][2 * t + 1] = dg_bits_as_float(static_cast<dg_u32>(in[7 + 2 * half]));
    }
  }
  // Each d[row][col] is c + a[row][0] b[0][col] + a[row][1] b[1][col] + ... in k order (products
  // are exact in f32); k outermost lets the compiler vectorize over the independent outputs
  // without changing any element's order of additions.
  for (int k = 0; k < 16; ++k)
    for (int row = 0; row < 16; ++row)
      for (int col = 0; col < 8; ++col) c[row][col] += a[row][k] * b[k][col];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; ++i)
      lanes[lane].out[i] = dg_float_as_bits(c[g + 8 * (i >> 1)][2 * t + (i & 1)]);
  }
}

template <bool Trans>
void ldmatrix_x4_op(LaneSlot* lanes, uint32_t) {
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 4; ++j) {
      dg_u32 lo, hi;
      if (!Trans) {
        const dg_u16* row = static_cast<const dg_u16*>(lanes[8 * j + g].ptr);
        lo = row[2 * t];
        hi = row[2 * t + 1];
      } else {
        lo = static_cast<const dg_u16*>(lanes[8 * j + 2 * t].ptr)[g];
        hi = static_cast<const dg_u16*>(lanes[8 * j + 2 * t + 1].ptr)[g];
      }
      lanes[lane].out[j] = lo | (hi << 16);
    }
  }
}

inline void require_full_warp(const char* what) {
  if (active_mask() != 0xffffffffu) fail(where() + ": " + what + " needs all 32 lanes of the warp");
}

// ldmatrix .x4 (.trans when Trans): this lane's row address, then the warp's collective.
template <bool Trans>
DG_DEVICE void ldmatrix_x4(dg_u32 (&r)[4], const void* smem_row) {
  require_full_warp("ldmatrix");
  if (reinterpret_cast<uintptr_t>(smem_row) % 16 != 0)
    fail(where() + ": ldmatrix row address is not 16-byte aligned");
  Block& b = *t_emu.block;
  if (!in_smem(b, smem_row, 16)) fail(where() + ": ldmatrix row address is not in shared memory");
  if (!b.race.empty()) race_read(smem_row, 16, kRaceLdmatrix);
  LaneSlot& s = my_lane_slot();
  s.ptr = smem_row;
  warp_collective(0xffffffffu, &ldmatrix_x4_op<Trans>);
  for (int j = 0; j < 4; ++j) r[j] = static_cast<dg_u32>(s.out[j]);
}

}  // namespace dg::emu
