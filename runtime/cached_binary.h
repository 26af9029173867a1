// The device binary (cubin) of a compiled graph, read back from the kernel cache where
// compile_graph put it, with its ptxas report: for tools that read the machine code without a GPU
// (the static checks, `dyngen plan`'s performance model).
#pragma once
#include <string>
#include <vector>

#include "runtime/executable.h"
#include "runtime/ptxas_report.h"
#include "runtime/status.h"

namespace dg {

struct CachedBinary {
  std::string binary;  // the cubin (or PTX, after a PTX fallback)
  std::vector<KernelResources> report;
};

// `source` is the plan's CUDA source (Executable::plan().source), `arch` the arch it was compiled
// for, `cache_dir` the folder the compile used ("" for the default). An error when the entry is
// missing (a cache that fell back to memory) or is not a device payload.
Result<CachedBinary> cached_device_binary(const std::string& source, const std::string& arch,
                                          const std::string& cache_dir);

// Every kernel of `exe` (compiled for `arch` into `cache_dir`) in one record: the first
// translation unit's binary, then the fallbacks' (built now if no call needed them yet: Note
// [Fallbacks compiled on first need] in codegen/kernel_plan.h), with both ptxas reports.
Result<std::vector<CachedBinary>> cached_executable_binaries(const Executable& exe,
                                                             const std::string& arch,
                                                             const std::string& cache_dir);

}  // namespace dg
