// CUDA's device built-ins for generated sources compiled on the host: barriers, warp shuffles and
// votes, atomics, bit casts and the fast-math intrinsics. Global namespace, CUDA's spellings.
#pragma once
#include <math.h>

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

#include "dg_emu_engine.h"

namespace dg::emu {

template <typename To, typename From>
inline To bits_as(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}

enum ShuffleKind { kShflIdx, kShflXor, kShflUp, kShflDown };

// Note [Warp collectives]; inputs: in[0] value bits, in[1] lane/mask/delta, in[2] width.
template <int Kind>
void shuffle_op(LaneSlot* lanes, uint32_t participants) {
  for (uint32_t m = participants; m; m &= m - 1) {
    int lane = __builtin_ctz(m);
    int param = static_cast<int>(lanes[lane].in[1]);
    int width = static_cast<int>(lanes[lane].in[2]);
    int base = lane & ~(width - 1);
    int src = lane;
    if (Kind == kShflIdx) src = base + (param & (width - 1));
    if (Kind == kShflXor) src = lane ^ param;
    if (Kind == kShflUp) src = lane - param < base ? lane : lane - param;
    if (Kind == kShflDown) src = lane + param;
    if (src < 0 || src >= base + width || src > 31) src = lane;  // out of the segment: own value
    // A source lane outside the mask is undefined on a GPU; the emulation returns the own value.
    lanes[lane].out[0] = (participants >> src) & 1 ? lanes[src].in[0] : lanes[lane].in[0];
  }
}

template <int Kind, typename T>
inline T shuffle(unsigned mask, T var, int param, int width, const CallSite& site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "shuffle of an unsupported type");
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0)
    fail(where() + ": shuffle width must be a power of two up to 32");
  LaneSlot& s = my_lane_slot();
  s.in[0] = 0;
  std::memcpy(&s.in[0], &var, sizeof(T));
  s.in[1] = static_cast<uint64_t>(static_cast<uint32_t>(param));
  s.in[2] = static_cast<uint64_t>(width);
  warp_collective(mask, &shuffle_op<Kind>, &site);
  T r;
  std::memcpy(&r, &s.out[0], sizeof(T));
  return r;
}

inline void ballot_op(LaneSlot* lanes, uint32_t participants) {
  uint32_t bits = 0;
  for (uint32_t m = participants; m; m &= m - 1)
    if (lanes[__builtin_ctz(m)].in[0]) bits |= 1u << __builtin_ctz(m);
  for (uint32_t m = participants; m; m &= m - 1) {
    lanes[__builtin_ctz(m)].out[0] = bits;
    lanes[__builtin_ctz(m)].out[1] = participants;
  }
}

// The ballot of `pred` over the lanes taking part; `*participants` (if given) receives them.
inline unsigned ballot(unsigned mask, int pred, const CallSite& site,
                       unsigned* participants = nullptr) {
  LaneSlot& s = my_lane_slot();
  s.in[0] = pred != 0;
  warp_collective(mask, &ballot_op, &site);
  if (participants != nullptr) *participants = static_cast<unsigned>(s.out[1]);
  return static_cast<unsigned>(s.out[0]);
}

// Applies `f` to *p atomically (a compare-and-swap loop on the bits); returns the old value.
template <typename T, typename F>
inline T atomic_update(T* p, F f) {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t,
                               std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;
  U* u = reinterpret_cast<U*>(p);
  U old = __atomic_load_n(u, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(u, &old, bits_as<U>(f(bits_as<T>(old))), true,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return bits_as<T>(old);
}

}  // namespace dg::emu

// --- Barriers and warp collectives -----------------------------------------------------------
inline void __syncthreads() { dg::emu::sync_block(0); }
inline int __syncthreads_count(int pred) { return dg::emu::sync_block(pred != 0); }
inline int __syncthreads_and(int pred) {
  return dg::emu::sync_block(pred != 0) == static_cast<int>(dg::emu::t_emu.block->n_threads);
}
inline int __syncthreads_or(int pred) { return dg::emu::sync_block(pred != 0) != 0; }
// The warp collectives take their call site as defaulted arguments (Note [Warp collectives]).
#define DG_EMU_SITE const char *dg_file = __builtin_FILE(), unsigned dg_line = __builtin_LINE()
#define DG_EMU_AT \
  ::dg::emu::CallSite { dg_file, dg_line }
inline void __syncwarp(unsigned mask = 0xffffffffu, DG_EMU_SITE) {
  const ::dg::emu::CallSite site = DG_EMU_AT;
  dg::emu::warp_collective(mask, nullptr, &site);
}
inline unsigned __activemask() { return dg::emu::active_mask(); }

template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32, DG_EMU_SITE) {
  return dg::emu::shuffle<dg::emu::kShflIdx>(mask, var, src_lane, width, DG_EMU_AT);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32, DG_EMU_SITE) {
  return dg::emu::shuffle<dg::emu::kShflXor>(mask, var, lane_mask, width, DG_EMU_AT);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32, DG_EMU_SITE) {
  return dg::emu::shuffle<dg::emu::kShflUp>(mask, var, static_cast<int>(delta), width, DG_EMU_AT);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32, DG_EMU_SITE) {
  return dg::emu::shuffle<dg::emu::kShflDown>(mask, var, static_cast<int>(delta), width, DG_EMU_AT);
}
inline unsigned __ballot_sync(unsigned mask, int pred, DG_EMU_SITE) {
  return dg::emu::ballot(mask, pred, DG_EMU_AT);
}
inline int __any_sync(unsigned mask, int pred, DG_EMU_SITE) {
  return dg::emu::ballot(mask, pred, DG_EMU_AT) != 0;
}
inline int __all_sync(unsigned mask, int pred, DG_EMU_SITE) {
  unsigned participants = 0;
  return dg::emu::ballot(mask, pred, DG_EMU_AT, &participants) == participants;
}
#undef DG_EMU_SITE
#undef DG_EMU_AT

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
[[noreturn]] inline void __trap() { dg::emu::fail(dg::emu::where() + ": __trap()"); }

namespace dg::emu {
// A device-debug trap (Note [Device debug mode] in codegen/device/dg_debug.cuh): the message a GPU
// would print before its __trap(), formatted alike, ends the launch as its error.
[[noreturn]] __attribute__((format(printf, 1, 2))) inline void debug_trap(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  std::string text = buf;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  fail(text);
}
}  // namespace dg::emu
inline void __nanosleep(unsigned) {}
inline long long clock64() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// --- Atomics: real atomics, since the blocks of a grid run on several OS threads ---------------
#define DG_EMU_ATOMIC_INT(T)                                                                       \
  inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }             \
  inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }             \
  inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }             \
  inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }               \
  inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }             \
  inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }           \
  inline T atomicCAS(T* p, T expected, T desired) {                                                \
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
    return expected;                                                                               \
  }                                                                                                \
  inline T atomicMax(T* p, T v) {                                                                  \
    return dg::emu::atomic_update(p, [v](T old) { return old < v ? v : old; });                    \
  }                                                                                                \
  inline T atomicMin(T* p, T v) {                                                                  \
    return dg::emu::atomic_update(p, [v](T old) { return v < old ? v : old; });                    \
  }
DG_EMU_ATOMIC_INT(int)
DG_EMU_ATOMIC_INT(unsigned int)
DG_EMU_ATOMIC_INT(long long)
DG_EMU_ATOMIC_INT(unsigned long long)
#undef DG_EMU_ATOMIC_INT

inline float atomicAdd(float* p, float v) {
  return dg::emu::atomic_update(p, [v](float old) { return old + v; });
}
inline double atomicAdd(double* p, double v) {
  return dg::emu::atomic_update(p, [v](double old) { return old + v; });
}
inline float atomicExch(float* p, float v) {
  return dg::emu::atomic_update(p, [v](float) { return v; });
}

// --- Bit casts and integer intrinsics --------------------------------------------------------
inline unsigned __float_as_uint(float x) { return dg::emu::bits_as<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return dg::emu::bits_as<float>(x); }
inline int __float_as_int(float x) { return dg::emu::bits_as<int>(x); }
inline float __int_as_float(int x) { return dg::emu::bits_as<float>(x); }
inline long long __double_as_longlong(double x) { return dg::emu::bits_as<long long>(x); }
inline double __longlong_as_double(long long x) { return dg::emu::bits_as<double>(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  uint64_t v = (uint64_t{y} << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
inline int __mul24(int a, int b) { return a * b; }
inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
inline int __mulhi(int a, int b) { return static_cast<int>((int64_t{a} * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((uint64_t{a} * b) >> 32);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}

// --- Loads and stores with cache hints: plain accesses here -----------------------------------
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
template <typename T>
inline T __ldcg(const T* p) {
  return *p;
}
template <typename T>
inline T __ldcs(const T* p) {
  return *p;
}
template <typename T>
inline void __stcg(T* p, T v) {
  *p = v;
}
template <typename T>
inline void __stcs(T* p, T v) {
  *p = v;
}
inline size_t __cvta_generic_to_shared(const void* p) { return reinterpret_cast<size_t>(p); }

// --- Float intrinsics. The host computes __expf and friends with the accurate libm function; a
// GPU's approximations differ by a few ulp, so tests compare with a tolerance wherever a kernel
// uses them. ------------------------------------------------------
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int __float2int_rn(float x) { return static_cast<int>(nearbyintf(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(floorf(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(ceilf(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }

// CUDA's overloaded min/max: usual arithmetic conversions, and fmin/fmax for floating types.
template <typename A, typename B,
          typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>)
    return std::fmin(C(a), C(b));
  else
    return C(a) < C(b) ? C(a) : C(b);
}
template <typename A, typename B,
          typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>)
    return std::fmax(C(a), C(b));
  else
    return C(a) < C(b) ? C(b) : C(a);
}
