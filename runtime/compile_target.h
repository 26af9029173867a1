// Where a compile's binary runs: a CompileRequest's target resolved against the GPUs here, and the
// arch its binary is built for.
#pragma once
#include <string>

#include "runtime/status.h"

namespace dg {

struct ResolvedTarget {
  std::string name;  // "host" or an sm_XX arch
  bool runnable;     // a device here can run it
  int device = 0;    // the CUDA device it is loaded into at compile time
};

// "host", "cuda", "cuda:N", an sm_XX arch, or "" (cuda if a GPU is present, else host); an error
// names what is wrong (an unknown target, a missing GPU).
Result<ResolvedTarget> resolve_target(const std::string& requested);

// The arch the binary of a device target is built for: its own, or its PTX ("compute_90a") when
// the driver is older than NVRTC (Note [PTX when the driver is older]).
std::string binary_arch(const ResolvedTarget& t);

}  // namespace dg
