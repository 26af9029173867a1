#include "runtime/model/occupancy.h"

#include <algorithm>
#include <climits>

namespace dg {

Occupancy occupancy(const GpuSpec& gpu, int threads_per_block, int registers_per_thread,
                    int64_t shared_bytes_per_block) {
  Occupancy o;
  o.warps_per_block = std::max(1, (threads_per_block + 31) / 32);
  struct Limit {
    int64_t blocks;
    const char* name;
  };
  Limit limits[4] = {
      {gpu.max_blocks_per_sm, "blocks"},
      {gpu.max_warps_per_sm / o.warps_per_block, "warps"},
      {INT_MAX, "registers"},
      {INT_MAX, "shared memory"},
  };
  if (registers_per_thread > 0) {
    int unit = gpu.register_unit_per_warp;
    int64_t per_warp = (static_cast<int64_t>(registers_per_thread) * 32 + unit - 1) / unit * unit;
    limits[2].blocks = gpu.registers_per_sm / per_warp / o.warps_per_block;
  }
  if (shared_bytes_per_block > 0) {
    if (shared_bytes_per_block > gpu.shared_bytes_per_block) {
      limits[3].blocks = 0;
    } else {
      limits[3].blocks =
          gpu.shared_bytes_per_sm / (shared_bytes_per_block + gpu.shared_reserved_per_block);
    }
  }
  const Limit* binding = &limits[0];
  for (const Limit& l : limits)
    if (l.blocks < binding->blocks) binding = &l;
  o.blocks_per_sm = static_cast<int>(std::max<int64_t>(0, binding->blocks));
  o.limit = binding->name;
  if (registers_per_thread < 0) o.limit += " (registers unknown: no ptxas report)";
  return o;
}

}  // namespace dg
