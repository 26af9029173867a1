// Shared-memory images of wgmma operands laid out from the PTX ISA's tables (not from the twin's
// address function), for the emulation tests and the GPU probes: Note [wgmma layouts].
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "codegen/device/dg_types.cuh"
#include "codegen/device/dg_wgmma_sm90.cuh"
#include "tests/emu/emu_test_util.h"
#include "tests/emu/isa_swizzle_tables.h"

namespace dg::emu::testing {

// Integers in [-4, 4] as bf16: products and sums of a k <= 64 product are exact in f32, so a
// GPU's summation order cannot change a bit of the result.
inline std::vector<dg_bf16> small_integers_bf16(size_t n, uint32_t seed) {
  std::vector<dg_bf16> v(n);
  for (dg_bf16& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = dg_float_to_bf16(static_cast<float>(static_cast<int>((seed >> 16) % 9) - 4));
  }
  return v;
}

// Bytes per atom row (the swizzle's width; 16 without swizzle: a core matrix row).
inline int atom_row_bytes(int swizzle) {
  switch (swizzle) {
    case kDgSwizzle128B:
      return 128;
    case kDgSwizzle64B:
      return 64;
    case kDgSwizzle32B:
      return 32;
  }
  return 16;
}

inline int physical_chunk(int swizzle, int r, int c) {
  switch (swizzle) {
    case kDgSwizzle128B:
      return kSwizzle128[r % 8][c];
    case kDgSwizzle64B:
      return kSwizzle64[r % 8][c];
    case kDgSwizzle32B:
      return kSwizzle32[r % 8][c];
  }
  return c;
}

// Where element (r, k) of a K-major operand at `base` lies, per the ISA's layouts: atoms of 8
// rows SBO apart; without swizzle, core matrices along K LBO apart; with one, k within the
// atom's row (k < S / 2).
inline uint32_t element_address(int swizzle, uint32_t base, uint32_t lbo, uint32_t sbo, int r,
                                int k) {
  const uint32_t atoms = static_cast<uint32_t>(r / 8) * sbo;
  const uint32_t within = static_cast<uint32_t>(k % 8) * 2;
  if (swizzle == kDgSwizzleNone)
    return base + atoms + static_cast<uint32_t>(k / 8) * lbo + static_cast<uint32_t>(r % 8) * 16 +
           within;
  const int row_bytes = atom_row_bytes(swizzle);
  EXPECT_LT(k, row_bytes / 2);
  return base + atoms + static_cast<uint32_t>((r % 8) * row_bytes) +
         16u * static_cast<uint32_t>(physical_chunk(swizzle, r, k / 8)) + within;
}

// Where element (i, k) of an MN-major operand at `base` lies (i along M or N), per the ISA's
// MN-major layouts: with a swizzle, atoms of 8 K rows of S bytes (S / 2 elements along i), K
// groups of 8 rows SBO apart and atoms along i LBO apart; without one, core matrices of 8 K rows
// of 8 elements, chunks along i SBO apart and K groups LBO apart.
inline uint32_t mn_element_address(int swizzle, uint32_t base, uint32_t lbo, uint32_t sbo, int i,
                                   int k) {
  const uint32_t within = static_cast<uint32_t>(i % 8) * 2;
  const int c = i / 8;
  if (swizzle == kDgSwizzleNone)
    return base + static_cast<uint32_t>(c) * sbo + static_cast<uint32_t>(k / 8) * lbo +
           static_cast<uint32_t>(k % 8) * 16 + within;
  const int row_bytes = atom_row_bytes(swizzle), per_row = row_bytes / 16;
  return base + static_cast<uint32_t>(c / per_row) * lbo + static_cast<uint32_t>(k / 8) * sbo +
         static_cast<uint32_t>((k % 8) * row_bytes) +
         16u * static_cast<uint32_t>(physical_chunk(swizzle, k, c % per_row)) + within;
}

// The ISA's accumulator figure for .m64nNk16, f32: thread T's d[i].
inline int acc_row(int T, int i) { return 16 * (T / 32) + (T % 32) / 4 + ((i % 4) >= 2 ? 8 : 0); }
inline int acc_col(int T, int i) { return 8 * (i / 4) + 2 * (T % 4) + (i % 2); }

// A (64 x k) K-major and B (n x k), K-major or MN-major, laid out in one image per the ISA;
// their descriptors. a and b hold the logical matrices row by row ([64][k] and [n][k]).
struct Operands {
  int n = 16, k = 16, swizzle = kDgSwizzleNone;
  bool b_mn_major = false;
  uint32_t b_step_bytes = 32;  // how far B's start moves per k16 step
  std::vector<dg_bf16> a, b;
  std::vector<unsigned char> image;
  unsigned long long da = 0, db = 0;
};

inline Operands make_operands(int n, int k, int swizzle, uint32_t seed, bool integers = false,
                              bool b_mn_major = false) {
  Operands o;
  o.n = n;
  o.k = k;
  o.swizzle = swizzle;
  o.b_mn_major = b_mn_major;
  o.a = integers ? small_integers_bf16(64u * k, seed) : random_bf16(64u * k, seed);
  o.b = integers ? small_integers_bf16(static_cast<size_t>(n) * k, seed + 1)
                 : random_bf16(static_cast<size_t>(n) * k, seed + 1);
  // Without swizzle: core matrices along K 128 bytes apart, atoms of 8 rows k / 8 core matrices
  // long. With one: atoms of 8 rows of S bytes, 8 S bytes apart (k = S / 2).
  const uint32_t lbo = 128;
  const uint32_t sbo = swizzle == kDgSwizzleNone
                           ? static_cast<uint32_t>(k / 8) * 128
                           : 8u * static_cast<uint32_t>(atom_row_bytes(swizzle));
  const uint32_t a_base = 0, b_base = 8 * sbo;  // A's 8 atoms, then B's (1024-byte aligned)
  // MN-major B: with a swizzle, K groups one atom (8 rows of S bytes) apart and atoms along N
  // after all of K; without one, K groups one core matrix (128 bytes) apart, chunks along N
  // after all of K.
  const uint32_t row_bytes = static_cast<uint32_t>(atom_row_bytes(swizzle));
  const uint32_t mn_sbo =
      swizzle == kDgSwizzleNone ? static_cast<uint32_t>(k / 8) * 128 : 8u * row_bytes;
  const uint32_t mn_lbo = swizzle == kDgSwizzleNone ? 128 : static_cast<uint32_t>(k / 8) * mn_sbo;
  const size_t mn_bytes = swizzle == kDgSwizzleNone
                              ? static_cast<size_t>(n / 8) * mn_sbo
                              : static_cast<size_t>((2u * n + row_bytes - 1) / row_bytes) * mn_lbo;
  o.image.assign(b_base + (b_mn_major ? mn_bytes : static_cast<size_t>(n / 8) * sbo), 0xee);
  auto put = [&](const std::vector<dg_bf16>& m, uint32_t base, int rows, bool mn_major) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < k; ++c) {
        const uint32_t at = mn_major ? mn_element_address(swizzle, base, mn_lbo, mn_sbo, r, c)
                                     : element_address(swizzle, base, lbo, sbo, r, c);
        std::memcpy(&o.image[at], &m[static_cast<size_t>(r) * k + c], 2);
      }
  };
  put(o.a, a_base, 64, false);
  put(o.b, b_base, n, b_mn_major);
  o.da = dg_wgmma_desc(a_base, lbo, sbo, swizzle);
  o.db = b_mn_major ? dg_wgmma_desc(b_base, mn_lbo, mn_sbo, swizzle)
                    : dg_wgmma_desc(b_base, lbo, sbo, swizzle);
  // A k16 step is 16 K rows of an MN-major operand: two K groups.
  if (b_mn_major) o.b_step_bytes = 2 * (swizzle == kDgSwizzleNone ? 128 : mn_sbo);
  return o;
}

}  // namespace dg::emu::testing
