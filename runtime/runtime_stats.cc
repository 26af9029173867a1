#include "runtime/runtime_stats.h"

#include <atomic>

namespace dg {

namespace {
std::atomic<int64_t> g_counts[kStatCount];
}  // namespace

const std::array<StatInfo, kStatCount>& stat_infos() {
  static const std::array<StatInfo, kStatCount> infos = {{
#define DG_STAT(name, doc) {#name, doc},
#include "runtime/dyngen_stats.def"
#undef DG_STAT
  }};
  return infos;
}

void count_stat(Stat stat, int64_t n) {
  g_counts[static_cast<int>(stat)].fetch_add(n, std::memory_order_relaxed);
}

std::array<int64_t, kStatCount> stat_values() {
  std::array<int64_t, kStatCount> values;
  for (int i = 0; i < kStatCount; ++i) values[i] = g_counts[i].load(std::memory_order_relaxed);
  return values;
}

RuntimeStats runtime_stats() {
  const std::array<int64_t, kStatCount> values = stat_values();
  RuntimeStats s;
#define DG_STAT(name, doc) s.name = values[static_cast<int>(Stat::name)];
#include "runtime/dyngen_stats.def"
#undef DG_STAT
  return s;
}

void reset_runtime_stats() {
  for (std::atomic<int64_t>& c : g_counts) c = 0;
}

}  // namespace dg
