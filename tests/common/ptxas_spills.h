// The spill check of the codegen tests: ptxas -v's report read with parse_ptxas_log.
#pragma once
#include <string>
#include <vector>

#include "runtime/ptxas_report.h"

namespace dg::testing {

// "kernel: N/M bytes spilled" for every kernel of the log that spills ("" when none does), and
// the number of kernels reported in *kernels.
inline std::string spilled_kernels(const std::string& log, int* kernels) {
  std::string bad;
  std::vector<KernelResources> report = parse_ptxas_log(log);
  *kernels = static_cast<int>(report.size());
  for (const KernelResources& k : report)
    if (k.spill_store_bytes || k.spill_load_bytes)
      bad += k.name + ": " + std::to_string(k.spill_store_bytes) + "/" +
             std::to_string(k.spill_load_bytes) + " bytes spilled\n";
  return bad;
}

}  // namespace dg::testing
