// What `dyngen plan` prints: the roofline figures of each kernel (runtime/model/roofline.h), the
// achievable estimate beside them (runtime/model/perf_model.h), and the eager baseline
// (runtime/model/eager_baseline.h), as a table or as JSON (Note [Plan figures in JSON] in
// plan_output.cc).
#pragma once
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "frontends/cli/compile_flags.h"
#include "runtime/model/eager_baseline.h"
#include "runtime/model/perf_model.h"
#include "runtime/model/roofline.h"

namespace dg {

struct PlanReport {
  const CompileFlags* flags = nullptr;
  GpuSpec gpu;
  std::string arch;                  // what the kernels were compiled for
  std::string cuobjdump;             // the tool read the SASS with; "" when there was none
  bool sass = false;                 // whether the SASS was read
  std::vector<std::string> missing;  // model-wide: what could not be read, and why
  PlanEstimate roofline;
  std::vector<KernelModel> models;  // one per roofline.kernels entry
  double estimated_seconds = 0;     // the models' sum over launched kernels
  std::optional<EagerEstimate> eager;
  std::string per_symbol;  // the per-token symbol, "" when there is none
  int64_t per_value = 0;
};

void print_plan_text(const PlanReport& r, std::ostream& out);
void print_plan_json(const PlanReport& r, std::ostream& out);
// Per launched kernel: occupancy, each phase's figures and limiter, the bounds, and which of them
// sets the estimate (Note [Achievable estimate], Note [Phases in series]); plan_explain.cc.
void print_plan_explanation(const PlanReport& r, std::ostream& out);

}  // namespace dg
