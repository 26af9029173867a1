// How many blocks of a kernel one SM holds at once, from ptxas's registers, the block's shared
// memory (static plus dynamic) and its threads, against the GPU's per-SM limits (Note [GPU facts]
// in roofline.h). The arithmetic is the CUDA occupancy calculator's, simplified: registers are
// allocated per warp in units of 256, shared memory per block with 1 KB reserved by the system.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/model/roofline.h"

namespace dg {

struct Occupancy {
  int blocks_per_sm = 0;  // 0: the block does not fit an SM at all
  std::string limit;      // which limit binds: "registers", "shared memory",
                          // "warps", "blocks"
  int warps_per_block = 0;
};

// registers < 0: unknown (no ptxas report); the register limit is then not applied, and `limit`
// says so.
Occupancy occupancy(const GpuSpec& gpu, int threads_per_block, int registers_per_thread,
                    int64_t shared_bytes_per_block);

}  // namespace dg
