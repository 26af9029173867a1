// The runtime's process-wide counters (dg_get_stats), generated from runtime/dyngen_stats.def:
// the list says how to add one.
#pragma once
#include <array>
#include <cstdint>

namespace dg {

// One enumerator per counter, named as the counter (the list's order).
enum class Stat {
#define DG_STAT(name, doc) name,
#include "runtime/dyngen_stats.def"
#undef DG_STAT
};

inline constexpr int kStatCount = 0
#define DG_STAT(name, doc) +1
#include "runtime/dyngen_stats.def"
#undef DG_STAT
    ;

// A snapshot of every counter, one field each (the list's order, dg_stats's layout).
struct RuntimeStats {
#define DG_STAT(name, doc) int64_t name = 0;
#include "runtime/dyngen_stats.def"
#undef DG_STAT
};
static_assert(sizeof(RuntimeStats) == kStatCount * sizeof(int64_t));

struct StatInfo {
  const char* name;
  const char* doc;  // the list's one-line meaning
};
const std::array<StatInfo, kStatCount>& stat_infos();

void count_stat(Stat stat, int64_t n = 1);
RuntimeStats runtime_stats();
std::array<int64_t, kStatCount> stat_values();  // runtime_stats() by index
void reset_runtime_stats();

// A kernel launch that takes the slow path for an unaligned operand (Note [Unaligned operands]).
inline void count_unaligned_launch() { count_stat(Stat::unaligned_launches); }
// A GEMM whose tensor maps did not encode, so its mma.sync kernels ran (Note [Tensor maps]).
inline void count_tma_fallback() { count_stat(Stat::tma_fallback_launches); }

}  // namespace dg
