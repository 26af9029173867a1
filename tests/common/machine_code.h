// The machine code of a compiled executable for the static checks: every kernel's SASS by name
// and ptxas's report, from both of its binaries (its fallbacks built first: Note [Fallbacks
// compiled on first need] in codegen/kernel_plan.h).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "runtime/cached_binary.h"
#include "runtime/model/sass_tools.h"

namespace dg::testing {

struct MachineCode {
  std::map<std::string, std::string> sass;  // by kernel name
  std::vector<KernelResources> report;      // ptxas's, every kernel
};

// An error names what is missing (a binary not in the cache, a listing cuobjdump refused).
inline Result<MachineCode> machine_code(const std::string& cuobjdump, const Executable& exe,
                                        const std::string& arch, const std::string& cache_dir) {
  auto binaries = cached_executable_binaries(exe, arch, cache_dir);
  if (!binaries.ok()) return binaries.status();
  MachineCode code;
  for (const CachedBinary& b : binaries.value()) {
    code.report.insert(code.report.end(), b.report.begin(), b.report.end());
    if (cuobjdump.empty()) continue;
    std::string error;
    std::map<std::string, std::string> sass = sass_by_function(cuobjdump, b.binary, &error);
    if (sass.empty()) return Status::error("no SASS listing: " + error);
    code.sass.insert(sass.begin(), sass.end());
  }
  return code;
}

}  // namespace dg::testing
