// Codegen entry point: one graph -> one CUDA C++ translation unit and its launch plan.
#pragma once
#include <set>
#include <stdexcept>
#include <string>

#include "codegen/kernel_plan.h"
#include "ir/graph.h"

namespace dg {

// A valid graph that codegen cannot lower (an op/dtype combination without a kernel).
class UnsupportedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the source is written for, beyond the graph.
struct CodegenOptions {
  // K-major bf16 GEMMs on the sm_90a main loop, wgmma fed by TMA, with their mma.sync kernels as
  // fallbacks (Note [sm_90a GEMMs] in codegen/emit_wgmma.cc); otherwise mma.sync only.
  bool wgmma = false;
  // The blocks a wave holds, for the wgmma tiles' M ranges (Note [sm_90a GEMMs]); 0 for the
  // H200's SM count (kFillCtas). Tests lower it to reach every tile at small M.
  int64_t wave_ctas = 0;
};

// The switches --disable-pass accepts beside the pipeline's passes: "wgmma" keeps an sm_90a
// compile on the mma.sync kernels, for A/B comparisons.
std::vector<std::string> codegen_switch_names();

// The options for device code of `arch` ("host" for the portable source the host emulation
// runs by default), with the switches in `disabled` off.
CodegenOptions codegen_options_for(const std::string& arch, const std::set<std::string>& disabled);

// The graph must verify. Static dims are literals in the source; symbols are the trailing
// `long long` arguments of every kernel (see KernelPlan::symbols).
KernelPlan emit_cuda(const Graph& g, const CodegenOptions& options = {});

}  // namespace dg
