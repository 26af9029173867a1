// Paired epilogue stores: a GEMM epilogue writes its outputs two neighbouring columns at a time.
//
// Note [Paired stores]
// A tensor-core accumulator fragment gives every lane two neighbouring columns of a row (mma.sync's
// c0/c1 and c2/c3, wgmma's d[i]/d[i + 1] for even i: Note [mma fragment layouts] in
// dg_mma_sm80.cuh and Note [wgmma layouts] in dg_wgmma_sm90.cuh). Stored one element at a time, a
// bf16 output takes one 2-byte store per element; stored as a pair, one 4-byte store (an f32
// output: one 8-byte store), half the store instructions for the same bytes (a review of the SASS
// asked for "bf16x2 or wider stores").
// - The generated epilogue body stays per element: it computes element (row, col), then
//   (row, col + 1), in the same order and with the same arithmetic as before, so results are
//   bit-identical. Only its stores go through dg_put<slot>(stores, address, value), one slot per
//   output: the first element's call holds the value in a register, the second's writes both.
// - A pair needs both columns inside N and an address aligned to the pair. The code generator
//   pairs only when N is even (then col even < N gives col + 1 < N, and every row starts at an
//   even element, since the outputs are [rows][N] from c_base, a multiple of N). The base
//   pointers' alignment is the host's to check, before the launch (Note [Unaligned operands] in
//   codegen/kernel_plan.h): a call whose output is off its pair boundary runs the GEMM's fallback
//   kernel instead, which stores element by element (the same results, slower; counted and
//   logged). A kernel that pairs has one copy of its epilogue: a device-side choice between pairs
//   and single stores needed two (one per branch), which cost the seed backward's small-M kernel
//   half its cold compile and the performance model could time only the longer one.
// - Outputs of other types (bool, integers, f64) are stored element by element in both calls.
// - DgDirectStores stores every element at once: the split-K reductions and the scalar tiles,
//   whose lanes hold one column each, GEMMs with an odd N, grouped GEMMs, and the fallback
//   kernels.
#pragma once
#include "dg_config.cuh"
#include "dg_types.cuh"

#if defined(DG_HAS_DEVICE)

// The bits of a value that can be half of a pair; kPairs is false for the other types.
template <class T>
struct DgPairBits {
  static constexpr bool kPairs = false;
};
template <>
struct DgPairBits<dg_bf16> {
  static constexpr bool kPairs = true;
  static DG_DEVICE dg_u32 bits(dg_bf16 v) { return v.bits; }
};
template <>
struct DgPairBits<dg_f16> {
  static constexpr bool kPairs = true;
  static DG_DEVICE dg_u32 bits(dg_f16 v) { return v.bits; }
};
template <>
struct DgPairBits<float> {
  static constexpr bool kPairs = true;
  static DG_DEVICE dg_u32 bits(float v) { return dg_float_as_bits(v); }
};

// Writes the pair (first, second) at p, which is aligned to 2 * sizeof(T). A GPU faults on a
// misaligned address ("misaligned address"); so does the host emulation, rather than storing it.
template <class T>
DG_DEVICE void dg_store_pair(T* p, dg_u32 first, T second) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "pairs of 16- or 32-bit values");
#if defined(DG_HOST_EMULATION)
  if (reinterpret_cast<uintptr_t>(p) % (2 * sizeof(T)) != 0)
    ::dg::emu::fail(::dg::emu::where() + ": a paired store at an address off the pair's boundary");
#endif
  const dg_u32 second_bits = DgPairBits<T>::bits(second);
  if constexpr (sizeof(T) == 2) {
    const dg_u32 word = first | (second_bits << 16);  // the lower address in the low half
#if defined(DG_ON_GPU)
    *reinterpret_cast<dg_u32*>(p) = word;
#else
    __builtin_memcpy(p, &word, sizeof word);
#endif
  } else {
#if defined(DG_ON_GPU)
    *reinterpret_cast<uint2*>(p) = make_uint2(first, second_bits);
#else
    const dg_u32 words[2] = {first, second_bits};
    __builtin_memcpy(p, words, sizeof words);
#endif
  }
}

// Every element stored at once.
struct DgDirectStores {
  static constexpr bool kPaired = false;
};

// The stores of a launch whose kSlots outputs are stored in pairs, their base addresses aligned
// to a pair (the host checked them): the first element's value of each slot held until the
// second's.
template <int kSlots>
struct DgPairs {
  static constexpr bool kPaired = true;
  dg_u32 held[kSlots];
};

// The first (kSecond = false) or second element of a pair.
template <bool kSecond, class Stores>
struct DgPairHalf {
  Stores& stores;
};

template <int kSlot, class T>
DG_DEVICE void dg_put(const DgDirectStores&, T* p, T v) {
  *p = v;
}

template <int kSlot, class T, int kSlots>
DG_DEVICE void dg_put(const DgPairHalf<false, DgPairs<kSlots>>& half, T* p, T v) {
  if constexpr (DgPairBits<T>::kPairs)
    half.stores.held[kSlot] = DgPairBits<T>::bits(v);
  else
    *p = v;
}

template <int kSlot, class T, int kSlots>
DG_DEVICE void dg_put(const DgPairHalf<true, DgPairs<kSlots>>& half, T* p, T v) {
  if constexpr (DgPairBits<T>::kPairs)
    dg_store_pair(p - 1, half.stores.held[kSlot], v);
  else
    *p = v;
}

// Calls element(half, h) for the columns col + h (h = 0, 1; col even) of one row that lie inside
// [0, N): as a pair (DgPairs: the code generator pairs only an even N, so col + 1 < N with col),
// or element by element, each with its own bounds check.
template <class Stores, class Element>
DG_DEVICE void dg_store_columns(Stores& stores, long long col, long long N,
                                const Element& element) {
  if constexpr (Stores::kPaired) {
    if (col < N) {
      element(DgPairHalf<false, Stores>{stores}, 0);
      element(DgPairHalf<true, Stores>{stores}, 1);
    }
  } else {
    if (col < N) element(stores, 0);
    if (col + 1 < N) element(stores, 1);
  }
}

#endif  // DG_HAS_DEVICE
