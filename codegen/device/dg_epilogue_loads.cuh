// A GEMM epilogue's elementwise operands, loaded for a fragment of element pairs before the first
// of their values is used.
//
// Note [Epilogue operand loads]
// An epilogue reads operands of the output's shape at (row, col) (the activations of a
// silu_backward, a residual). Read in the body, every element waited for its own 2-byte load
// before its arithmetic, between the branches of the bounds checks: a review of the Phi-3.5-MoE
// backward's SASS counted 128 loads waited for in series per consumer warp, about 40% of the
// kernel's time. So the loads are taken out of the body and issued for a whole fragment first:
// - The code generator emits each such read as dg_in<k>(dg_st, address), operand k of the
//   kernel's list, and declares the stores as DgEpilogueIo<Stores, E...> (the stores plus the
//   operands' pointers, from c_base, and the row length N).
// - The tensor-core epilogue drivers (mma.sync and wgmma) hold a DgEpilogueLoads over a fragment
//   of pairs, the two neighbouring columns (col, col + 1), col even, that a lane's accumulators
//   hold (Note [Paired stores] in dg_store.cuh). They call load() for each pair of the fragment,
//   then run the body per element with element(), which hands it that element's loaded values
//   beside its stores: one load latency for the fragment, not one per element.
// - A kernel whose stores pair (DgPairs: N is even) loads its bf16, f16 and f32 operands in pairs
//   too: one 4-byte (f32: 8-byte) load per pair, both columns inside N or neither. As for its
//   outputs, the host checks each such operand's base for a pair's alignment before the launch
//   (CheckedOperand::read_in_pairs), which makes every pair at an even column aligned, and a call
//   with one off runs the GEMM's fallback kernel (Note [GEMM fallbacks] in
//   codegen/kernel_plan.h). One kernel, one way to load: a device-side choice between pair and
//   element loads kept both in the SASS, and joining them made the element path wait on each
//   load to pack its halves.
// - Other kernels (DgDirectStores: the fallback, an odd N, grouped GEMMs) and other types load
//   each column inside [0, M) x [0, N) on its own, into its own register, still for the whole
//   fragment before the first use.
// - The wgmma epilogue's loads are unconditional (load_clamped): a pair outside [0, M) x [0, N)
//   loads the nearest element inside (the launch has one), a value the body never reads. Behind
//   a bounds branch each, ptxas sank them into the branches of their uses, after the products'
//   wgmmas: the Phi-3.5-MoE backward's gate/up epilogue waited for 25 rounds of loads in series
//   per warp (`dyngen plan --explain`), now 4, one per fragment. The mma.sync epilogue keeps its
//   guarded loads: with 168 registers a thread at most on sm_80 (128 threads), the Phi
//   backward's 64 x 128 kernel spilled with every load issued at once.
// - The values are the elements' bits, so results are bit-identical to reading them in the body.
// - Every other context (a driver that does not prefetch; DgDirectStores{} from the scalar,
//   rank-r and split-K kernels) reads the element where the body asks for it, as before.
// The fragment's size is the driver's trade between latency and registers: one register per
// operand and pair (two unpaired) stays live from the loads to the pair's use.
#pragma once
#include "dg_config.cuh"
#include "dg_store.cuh"
#include "dg_types.cuh"

#if defined(DG_HAS_DEVICE)

// One load of the Word at p (read-only for the kernel: the non-coherent path, as the body's reads
// of its const __restrict__ parameters), aligned to sizeof(Word); the emulation faults off that
// boundary, as a GPU does.
template <class Word, class E>
DG_DEVICE Word dg_load_word(const E* p) {
#if defined(DG_ON_GPU)
  return __ldg(reinterpret_cast<const Word*>(p));
#else
  if (reinterpret_cast<uintptr_t>(p) % sizeof(Word) != 0)
    ::dg::emu::fail(::dg::emu::where() + ": a paired load at an address off the pair's boundary");
  Word w;
  __builtin_memcpy(&w, p, sizeof w);
  return w;
#endif
}

// One element, on the non-coherent path where its type allows (as the body read it).
template <class E>
DG_DEVICE E dg_load_element(const E* p) {
  return *p;
}
DG_DEVICE dg_bf16 dg_load_element(const dg_bf16* p) { return dg_bf16{dg_load_word<dg_u16>(p)}; }
DG_DEVICE dg_f16 dg_load_element(const dg_f16* p) { return dg_f16{dg_load_word<dg_u16>(p)}; }
DG_DEVICE float dg_load_element(const float* p) { return dg_load_word<float>(p); }

// How operand elements of type E are held two neighbouring columns at a time, and loaded: by one
// load of both (kPaired, for a type with a pair load), or one load per column, each value in its
// own register until it is used.
template <class E, bool kPaired>
struct DgOperandPair {
  struct Word {
    E v[2];
  };
  static constexpr int kRegisters = 2 * ((sizeof(E) + 3) / 4);
  static DG_DEVICE Word load(const E* p, bool first, bool second) {
    Word w{};
    if (first) w.v[0] = dg_load_element(p);
    if (second) w.v[1] = dg_load_element(p + 1);
    return w;
  }
  static DG_DEVICE E get(const Word& w, int h) { return w.v[h]; }
};

// Pairs of bf16 or f16: one 4-byte load, the lower column in the low half (as stores pair them).
template <class E>
struct DgOperandPair16 {
  typedef dg_u32 Word;
  static constexpr int kRegisters = 1;
  static DG_DEVICE Word load(const E* p, bool first, bool) {
    return first ? dg_load_word<dg_u32>(p) : 0u;
  }
  static DG_DEVICE E get(Word w, int h) { return E{static_cast<dg_u16>(w >> (16 * h))}; }
};
template <>
struct DgOperandPair<dg_bf16, true> : DgOperandPair16<dg_bf16> {};
template <>
struct DgOperandPair<dg_f16, true> : DgOperandPair16<dg_f16> {};

// Pairs of f32: one 8-byte load.
template <>
struct DgOperandPair<float, true> {
  typedef float2 Word;
  static constexpr int kRegisters = 2;
  static DG_DEVICE Word load(const float* p, bool first, bool) {
    return first ? dg_load_word<float2>(p) : make_float2(0.0f, 0.0f);
  }
  static DG_DEVICE float get(Word w, int h) { return h ? w.y : w.x; }
};

// The operands' pointers, and Words, one pair of each.
template <bool kPaired, class... E>
struct DgOperandList;

template <bool kPaired>
struct DgOperandList<kPaired> {
  struct Words {};
  static constexpr int kRegisters = 0;
  DG_DEVICE DgOperandList() {}
  DG_DEVICE void load(Words&, long long, bool, bool) const {}
};

template <bool kPaired, class E, class... Rest>
struct DgOperandList<kPaired, E, Rest...> {
  typedef DgOperandPair<E, kPaired> Pair;
  struct Words {
    typename Pair::Word word;
    typename DgOperandList<kPaired, Rest...>::Words rest;
  };
  static constexpr int kRegisters = Pair::kRegisters + DgOperandList<kPaired, Rest...>::kRegisters;
  const E* base;
  DgOperandList<kPaired, Rest...> rest;

  DG_DEVICE explicit DgOperandList(const E* p, const Rest*... more) : base(p), rest(more...) {}

  // Columns col and col + 1 at base + at (col even); `first` and `second` say which lie inside
  // [0, M) x [0, N). Paired, N is even: both or neither.
  DG_DEVICE void load(Words& w, long long at, bool first, bool second) const {
    w.word = Pair::load(base + at, first, second);
    rest.load(w.rest, at, first, second);
  }

  // Operand k's value in column col + h.
  template <int k>
  static DG_DEVICE auto get(const Words& w, int h) {
    if constexpr (k == 0)
      return Pair::get(w.word, h);
    else
      return DgOperandList<kPaired, Rest...>::template get<k - 1>(w.rest, h);
  }
};

// An epilogue's stores and its elementwise operands: operand k's element (row, col) at
// p_k[row * ld + col], p_k from c_base.
template <class Stores, class... E>
struct DgEpilogueIo : Stores {
  typedef DgOperandList<Stores::kPaired, E...> List;
  long long ld;
  List operands;
  DG_DEVICE explicit DgEpilogueIo(long long row_length, const E*... p)
      : ld(row_length), operands(p...) {}
};

// What the body of one element sees: its stores (`half`, as the driver built them) and the
// loaded pair that holds its operands' values, column col + h.
template <class Half, class List>
struct DgElementIo {
  const Half& half;
  const typename List::Words& words;
  int h;
};

// The stores under a DgEpilogueIo, which the dg_put overloads of dg_store.cuh take.
template <class S, class... E>
DG_DEVICE const S& dg_stores_of(const DgEpilogueIo<S, E...>& io) {
  return io;
}
template <bool kSecond, class S, class... E>
DG_DEVICE DgPairHalf<kSecond, S> dg_stores_of(const DgPairHalf<kSecond, DgEpilogueIo<S, E...>>& h) {
  return {h.stores};
}
template <class Half>
DG_DEVICE const Half& dg_stores_of(const Half& h) {
  return h;
}

template <int kSlot, class T, bool kSecond, class S, class... E>
DG_DEVICE void dg_put(const DgPairHalf<kSecond, DgEpilogueIo<S, E...>>& half, T* p, T v) {
  dg_put<kSlot>(dg_stores_of(half), p, v);
}
template <int kSlot, class T, class Half, class List>
DG_DEVICE void dg_put(const DgElementIo<Half, List>& e, T* p, T v) {
  dg_put<kSlot>(dg_stores_of(e.half), p, v);
}

// Operand k's element at p: loaded with its fragment (DgElementIo), or read here.
template <int k, class Context, class E>
DG_DEVICE E dg_in(const Context&, const E* p) {
  return *p;
}
template <int k, class Half, class List, class E>
DG_DEVICE E dg_in(const DgElementIo<Half, List>& e, const E*) {
  return List::template get<k>(e.words, e.h);
}

// The operands of a fragment of kPairs pairs, for stores without operands: nothing to load.
template <class Stores, int kPairs>
struct DgEpilogueLoads {
  static constexpr int kRegistersPerPair = 0;
  DG_DEVICE explicit DgEpilogueLoads(const Stores&) {}
  DG_DEVICE void load(int, long long, long long, long long, long long) {}
  DG_DEVICE void load_clamped(int, long long, long long, long long, long long) {}
  template <class Half>
  DG_DEVICE const Half& element(const Half& half, int, int) const {
    return half;
  }
};

template <int kPairs, class S, class... E>
struct DgEpilogueLoads<DgEpilogueIo<S, E...>, kPairs> {
  typedef typename DgEpilogueIo<S, E...>::List List;
  static constexpr int kRegistersPerPair = List::kRegisters;
  const DgEpilogueIo<S, E...>& io;
  typename List::Words words[kPairs];

  DG_DEVICE explicit DgEpilogueLoads(const DgEpilogueIo<S, E...>& stores) : io(stores) {}
  // Pair `pair` of the fragment: columns col (even) and col + 1 of row, clipped to M x N.
  DG_DEVICE void load(int pair, long long row, long long col, long long M, long long N) {
    const bool in = row < M;
    io.operands.load(words[pair], row * io.ld + col, in && col < N, in && col + 1 < N);
  }
  // As load, unconditionally: outside M x N the nearest element inside (Note [Epilogue operand
  // loads]); paired, N is even.
  DG_DEVICE void load_clamped(int pair, long long row, long long col, long long M, long long N) {
    const long long r = row < M ? row : M - 1;
    const long long c = col < N ? col : N - (S::kPaired ? 2 : 1);
    io.operands.load(words[pair], r * io.ld + c, true, col + 1 < N);
  }
  // What the body of column col + h of pair `pair` sees, its stores `half`.
  template <class Half>
  DG_DEVICE DgElementIo<Half, List> element(const Half& half, int pair, int h) const {
    return {half, words[pair], h};
  }
};

// How many of a fragment's kTiles n8 tiles (two pairs each) a driver loads the operands of at
// once: the most, dividing kTiles, whose values fit in 16 registers (the seed and Phi backward's
// two bf16 operands: 4 tiles paired, 16 loads in flight; 2 element by element). With 32, the
// sm_80 64 x 128 kernel of the Phi backward went from 136 registers to 168 and spilled.
template <class Stores, int kTiles>
struct DgEpilogueLoadTiles {
  static constexpr int kPerTile = 2 * DgEpilogueLoads<Stores, 1>::kRegistersPerPair;
  static constexpr int fit(int t) {
    return t <= 1 || (kTiles % t == 0 && t * kPerTile <= 16) ? t : fit(t - 1);
  }
  static constexpr int value = fit(kTiles);
};

#endif  // DG_HAS_DEVICE
