// A JSON description of a compiled executable: kernels, launch shapes as symbolic expressions,
// workspace, cache key (used by `dyngen compile --json` and dg_executable_describe).
#pragma once
#include <string>
#include <vector>

#include "runtime/executable.h"
#include "runtime/json_text.h"
#include "runtime/ptxas_report.h"

namespace dg {

// With `resources` (a device compile's ptxas report), each kernel also gets a "ptxas" object, or
// null where the report has no entry for it.
Json describe_executable_json(const Executable& e, const std::string& key, int cache_hit,
                              const std::vector<KernelResources>* resources = nullptr);

}  // namespace dg
