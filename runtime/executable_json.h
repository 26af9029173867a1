// A JSON description of a compiled executable: kernels, launch shapes as symbolic expressions,
// workspace, cache key (used by `dyngen compile --json` and dg_executable_describe).
#pragma once
#include <string>

#include "runtime/executable.h"
#include "runtime/json_escape.h"

namespace dg {

std::string describe_executable_json(const Executable& e, const std::string& key, int cache_hit);

}  // namespace dg
