// wgmma (sm_90a): warpgroup-wide MMA, m64nNk16 with bf16 operands in shared memory and f32
// accumulators in registers, issued asynchronously and retired by wgmma.wait_group. One interface,
// two implementations, as for mma.sync (dg_mma_sm80.cuh): inline PTX on a GPU compiled for
// sm_90a, and on the host a twin (dg_wgmma_sm90_emu.h) that follows the PTX ISA's descriptor,
// shared-memory and fragment layouts (Note [wgmma layouts]) and its asynchrony
// (Note [Deferred wgmma]). The descriptor encoding and the layout functions are plain C++ too, so
// tests check them without a kernel.
//
// Note [wgmma layouts]
// (PTX ISA 9.7.15.5.1, "Register Fragments and Shared Memory Matrix
// Layouts": the Matrix Descriptor Format, Shared Memory Matrix Layout with its table of swizzle
// atoms and figures of K-major swizzling, and the fragment figure for accumulator D of
// .m64nNk16; cross-read with CuTe's GMMA layouts in cute/atom/mma_traits_sm90_gmma.hpp, where
// CLayout_64xN, Layout_{K,MN}_SW{32,64,128}_Atom and make_gmma_desc's canonical forms say the
// same). K-major operands (A stored [M][K], B stored [N][K]: imm-trans-a = imm-trans-b = 0) and
// MN-major ones (A stored [K][M], B stored [K][N]: the immediate 1, bf16 only) are covered.
// - Descriptor, 64 bits: start address >> 4 in bits 0-13 (a shared-window address), leading
//   dimension byte offset (LBO) >> 4 in bits 16-29, stride dimension byte offset (SBO) >> 4 in
//   bits 32-45, base offset in bits 49-51 (0 here: atoms start on their pattern's boundary),
//   swizzle in bits 62-63: 0 none, 1 128-byte, 2 64-byte, 3 32-byte.
// - A K-major operand has 64 (A) or N (B) rows of 16 bf16 along K: two 16-byte chunks per row.
//   Rows come in atoms of 8. Without swizzle an atom is a core matrix, 8 rows of 16 bytes, 16
//   bytes apart, and chunk j of row r lies at start + (r % 8) * 16 + (r / 8) * SBO + j * LBO.
//   With an S-byte swizzle (S = 32, 64, 128) an atom is 8 rows of S bytes, S bytes apart; chunk j
//   of row r lies at start + (r % 8) * S + (r / 8) * SBO + 16 j, and then the address's 16-byte
//   chunk bits (bit 4 up, log2(S / 16) of them) are XORed with the same number of bits from bit
//   7 up: bits 4-6 ^= 7-9 (128B), 4-5 ^= 7-8 (64B), 4 ^= 7 (32B). LBO is unused. A k16 step at
//   k0 inside a wider swizzled row starts at start + 2 * k0 bytes, and the XOR applies after.
// - An MN-major operand (the ISA's Shared Memory Matrix Layout with imm-trans = 1, its MN-major
//   swizzle atoms of Table 38 and the Strides subsection's MN-major row) is stored the other way
//   round: element i along M or N is contiguous, in 16-byte chunks c = i / 8 of 8 elements, and
//   a k16 step is 16 K rows. With an S-byte swizzle a K row holds S / 16 chunks (S / 2 elements):
//   element (i, k) lies at start + (c % (S / 16)) * 16 + (c / (S / 16)) * LBO + (k % 8) * S +
//   (k / 8) * SBO + 2 (i % 8), the chunk bits XORed as above (the atom is 8 K rows of S bytes).
//   LBO steps along M/N between atoms, SBO along K between groups of 8 rows. Without swizzle
//   the two swap: a core matrix is 8 K rows of one chunk, chunk c at c * SBO, K groups LBO apart.
// - Accumulator D (f32): thread T of the warpgroup, with w = T / 32, g = (T % 32) / 4 and
//   t = T % 4, holds d[i], i < N / 2, at row 16 w + g + 8 ((i % 4) / 2), column 8 (i / 4) + 2 t +
//   i % 2: each warp owns 16 rows, laid out as mma.m16n8's C fragment repeated along N.

#pragma once
#include "dg_config.cuh"
#include "dg_types.cuh"
#if defined(DG_HAS_DEVICE)
#include "dg_mma_sm80.cuh"  // require_full_warp under emulation
#endif

enum DgWgmmaSwizzle : int {
  kDgSwizzleNone = 0,
  kDgSwizzle128B = 1,
  kDgSwizzle64B = 2,
  kDgSwizzle32B = 3,
};

// Bytes from one row of an 8-row atom to the next (Note [wgmma layouts]).
DG_DEVICE int dg_wgmma_row_bytes(int swizzle) {
  return swizzle == kDgSwizzle128B  ? 128
         : swizzle == kDgSwizzle64B ? 64
         : swizzle == kDgSwizzle32B ? 32
                                    : 16;
}

// A shared-memory matrix descriptor; addresses and offsets are bytes, multiples of 16.
DG_DEVICE dg_u64 dg_wgmma_desc(dg_u32 smem_address, dg_u32 lbo, dg_u32 sbo, int swizzle) {
  return (dg_u64{(smem_address >> 4) & 0x3fffu}) | (dg_u64{(lbo >> 4) & 0x3fffu} << 16) |
         (dg_u64{(sbo >> 4) & 0x3fffu} << 32) | (dg_u64(swizzle & 3) << 62);
}

// The descriptor's fields.
struct DgWgmmaDescFields {
  dg_u32 start, lbo, sbo;  // bytes
  int base_offset, swizzle;
};
DG_DEVICE DgWgmmaDescFields dg_wgmma_desc_fields(dg_u64 desc) {
  return DgWgmmaDescFields{static_cast<dg_u32>(desc & 0x3fffu) << 4,
                           static_cast<dg_u32>((desc >> 16) & 0x3fffu) << 4,
                           static_cast<dg_u32>((desc >> 32) & 0x3fffu) << 4,
                           static_cast<int>((desc >> 49) & 7u), static_cast<int>(desc >> 62)};
}

// A shared-window address under a swizzle mode: its 16-byte chunk bits (bit 4 up) XORed with as
// many bits from bit 7 up (Note [wgmma layouts]); wgmma reads and TMA writes through it.
DG_DEVICE dg_u32 dg_swizzle_address(dg_u32 address, int swizzle) {
  if (swizzle == kDgSwizzleNone) return address;
  const dg_u32 bits = swizzle == kDgSwizzle128B ? 7u : swizzle == kDgSwizzle64B ? 3u : 1u;
  return address ^ (((address >> 7) & bits) << 4);
}

// The shared-window address of 16-byte chunk j (0 or 1: k 0-7 or 8-15) of row r of a K-major
// operand (Note [wgmma layouts]).
DG_DEVICE dg_u32 dg_wgmma_chunk_address(dg_u64 desc, int r, int j) {
  const DgWgmmaDescFields f = dg_wgmma_desc_fields(desc);
  const dg_u32 row =
      static_cast<dg_u32>(r % 8) * static_cast<dg_u32>(dg_wgmma_row_bytes(f.swizzle)) +
      static_cast<dg_u32>(r / 8) * f.sbo;
  if (f.swizzle == kDgSwizzleNone) return f.start + row + static_cast<dg_u32>(j) * f.lbo;
  return dg_swizzle_address(f.start + row + 16u * static_cast<dg_u32>(j), f.swizzle);
}

// The shared-window address of element (i, k) of an MN-major operand, i along M or N (Note
// [wgmma layouts]).
DG_DEVICE dg_u32 dg_wgmma_mn_element_address(dg_u64 desc, int i, int k) {
  const DgWgmmaDescFields f = dg_wgmma_desc_fields(desc);
  const dg_u32 c = static_cast<dg_u32>(i / 8), within = 2u * static_cast<dg_u32>(i % 8);
  const dg_u32 kg = static_cast<dg_u32>(k / 8), kr = static_cast<dg_u32>(k % 8);
  if (f.swizzle == kDgSwizzleNone) return f.start + c * f.sbo + kg * f.lbo + kr * 16u + within;
  const dg_u32 row_bytes = static_cast<dg_u32>(dg_wgmma_row_bytes(f.swizzle));
  const dg_u32 per_row = row_bytes / 16u;
  return dg_swizzle_address(
             f.start + (c % per_row) * 16u + (c / per_row) * f.lbo + kr * row_bytes + kg * f.sbo,
             f.swizzle) +
         within;
}

// Where accumulator d[i] of warpgroup thread T lies in the 64 x N tile (Note [wgmma layouts]).
DG_DEVICE int dg_wgmma_acc_row(int T, int i) {
  return 16 * (T / 32) + (T % 32) / 4 + 8 * ((i % 4) / 2);
}
DG_DEVICE int dg_wgmma_acc_col(int T, int i) { return 8 * (i / 4) + 2 * (T % 4) + i % 2; }

#if defined(DG_HOST_EMULATION)
#include "dg_wgmma_sm90_emu.h"  // the host twin
#endif

#if defined(DG_HAS_DEVICE) && (defined(DG_HOST_EMULATION) || defined(__CUDA_ARCH_FEAT_SM90_ALL))

// The shared-window address of a shared-memory pointer, for descriptors.
DG_DEVICE dg_u32 dg_smem_address(const void* p) {
#if defined(DG_ON_GPU)
  return static_cast<dg_u32>(__cvta_generic_to_shared(p));
#else
  return ::dg::emu::wgmma_smem_address(p);
#endif
}

// wgmma.fence.sync.aligned: before the first wgmma, and between other accesses of the
// accumulator registers and a wgmma that uses them.
DG_DEVICE void dg_wgmma_fence() {
#if defined(DG_ON_GPU)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  ::dg::emu::require_warpgroups("wgmma.fence");
  ::dg::emu::warp_collective(0xffffffffu, &::dg::emu::wgmma_fence_op);
#endif
}

// wgmma.commit_group.sync.aligned: the wgmmas issued since the last commit form one group.
DG_DEVICE void dg_wgmma_commit() {
#if defined(DG_ON_GPU)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  ::dg::emu::require_warpgroups("wgmma.commit_group");
  ::dg::emu::warp_collective(0xffffffffu, &::dg::emu::wgmma_commit_op);
#endif
}

// wgmma.wait_group.sync.aligned N: all but the newest N committed groups have retired.
template <int N>
DG_DEVICE void dg_wgmma_wait() {
#if defined(DG_ON_GPU)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
  ::dg::emu::require_warpgroups("wgmma.wait_group");
  ::dg::emu::my_lane_slot().in[0] = N;
  ::dg::emu::warp_collective(0xffffffffu, &::dg::emu::wgmma_wait_op);
#endif
}

// Note [Warpgroup register counts]
// setmaxnreg.{inc,dec}.sync.aligned.u32 N (PTX ISA, "Miscellaneous Instructions: setmaxnreg",
// sm_90a) moves the executing warpgroup's per-thread register limit to N, a multiple of 8 in
// [24, 256]: .dec gives registers back to the block's pool, .inc takes them from it (waiting until
// the pool holds them; the new registers' contents are undefined). The same instruction must be
// executed by every warp of the warpgroup, and the warps synchronize before another one; an inc
// must not lower the limit, a dec must not raise it. ptxas honours it only when it knows the count
// at entry: the kernel needs __launch_bounds__(threads, 1) (without the minimum it prints info
// C7508, "'setmaxnreg' ignored; unable to determine register count at entry"); the count at entry
// is then 65536 / threads rounded down to 8 (168 for 384 threads), and the code after an inc is
// allocated up to its N. The emulation runs it as a warp collective (the lanes must agree on it)
// and then a warpgroup rendezvous: a warp parks until the other three warps of its warpgroup have
// executed as many setmaxnreg, and their latest must be the same instruction. N out of range, or
// an inc below (a dec above) the warp's previous limit, is an error; a warp that never gets there
// leaves the others parked, which the scheduler reports as a deadlock.
template <int kRegs>
DG_DEVICE void dg_setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: 24..256, step 8");
#if defined(DG_ON_GPU)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#else
  ::dg::emu::setmaxnreg(true, kRegs);
#endif
}

template <int kRegs>
DG_DEVICE void dg_setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: 24..256, step 8");
#if defined(DG_ON_GPU)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#else
  ::dg::emu::setmaxnreg(false, kRegs);
#endif
}

#if defined(DG_ON_GPU)
// The instruction for each N the kernels use: N / 2 accumulator registers, then the two
// descriptors, scale-d (a predicate), scale-a and scale-b 1, and imm-trans-a/-b (TA, TB).
template <int N>
struct DgWgmmaAsm;

template <>
struct DgWgmmaAsm<16> {
  template <int TA, int TB>
  DG_DEVICE static void issue(float (&d)[8], dg_u64 desc_a, dg_u64 desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7"
        "}, %8, %9, p, 1, 1, %11, %12;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};

template <>
struct DgWgmmaAsm<32> {
  template <int TA, int TB>
  DG_DEVICE static void issue(float (&d)[16], dg_u64 desc_a, dg_u64 desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
        "}, %16, %17, p, 1, 1, %19, %20;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};

template <>
struct DgWgmmaAsm<64> {
  template <int TA, int TB>
  DG_DEVICE static void issue(float (&d)[32], dg_u64 desc_a, dg_u64 desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, %35, %36;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};

template <>
struct DgWgmmaAsm<128> {
  template <int TA, int TB>
  DG_DEVICE static void issue(float (&d)[64], dg_u64 desc_a, dg_u64 desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};

template <>
struct DgWgmmaAsm<256> {
  template <int TA, int TB>
  DG_DEVICE static void issue(float (&d)[128], dg_u64 desc_a, dg_u64 desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
        "%111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "
        "%127"
        "}, %128, %129, p, 1, 1, %131, %132;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
          "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
          "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
          "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};

#endif  // DG_ON_GPU

// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16: d = A B^T (+ d when `accumulate`), A the
// 64 x 16 tile at desc_a and B the N x 16 tile at desc_b, K-major, or MN-major where
// kAMnMajor / kBMnMajor (imm-trans-a / -b = 1; Note [wgmma layouts]); d is this thread's N / 2
// accumulators. A warpgroup-wide collective; asynchronous until a dg_wgmma_wait retires its
// group (Note [Deferred wgmma]).
template <int N, bool kAMnMajor = false, bool kBMnMajor = false>
DG_DEVICE void dg_wgmma_m64nNk16_bf16(float (&d)[N / 2], dg_u64 desc_a, dg_u64 desc_b,
                                      bool accumulate) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N is a multiple of 8 up to 256");
#if defined(DG_ON_GPU)
  DgWgmmaAsm<N>::template issue<kAMnMajor ? 1 : 0, kBMnMajor ? 1 : 0>(d, desc_a, desc_b,
                                                                      accumulate ? 1 : 0);
#else
  ::dg::emu::require_warpgroups("wgmma.mma_async");
  ::dg::emu::LaneSlot& s = ::dg::emu::my_lane_slot();
  s.ptr = d;
  s.in[0] = desc_a;
  s.in[1] = desc_b;
  s.in[2] = accumulate ? 1 : 0;
  s.in[3] = N;
  s.in[4] = (kAMnMajor ? 1u : 0u) | (kBMnMajor ? 2u : 0u);
  ::dg::emu::warp_collective(0xffffffffu, &::dg::emu::wgmma_issue_op);
#endif
}

#endif  // wgmma available
