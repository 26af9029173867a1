// ptxas's verbose report of every kernel of a plan: both of its translation units compiled with
// NVRTC (the kernels, then the GEMMs' fallbacks, Note [Fallbacks compiled on first need] in
// codegen/kernel_plan.h), the logs joined, for the spill and shared-memory checks.
#pragma once
#include <string>
#include <vector>

#include "codegen/kernel_plan.h"
#include "runtime/emu/device_headers.h"
#include "runtime/nvrtc_compiler.h"

namespace dg::testing {

// `options` should ask ptxas for its report (-Xptxas -v); an error names the unit that failed.
inline Result<std::string> plan_ptxas_log(const KernelPlan& plan, const CompileOptions& options) {
  std::vector<CudaHeader> headers;
  for (const EmbeddedFile& f : device_headers())
    headers.push_back({std::string(f.name), std::string(f.content)});
  std::string log;
  for (const std::string* source : {&plan.source, &plan.fallback_source}) {
    if (source->empty()) continue;
    auto compiled = nvrtc_compile(*source, headers, options);
    const char* unit = source == &plan.source ? "kernels" : "fallback kernels";
    if (!compiled.ok()) return Status::error(std::string(unit) + ": " + compiled.message());
    log += compiled->log + "\n";
  }
  return log;
}

}  // namespace dg::testing
