// Running an executable on host buffers and checking it against the reference evaluator: what
// `dyngen run` and the numerics tests do.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/executable.h"
#include "runtime/reference/host_tensor.h"
#include "runtime/status.h"

namespace dg {

// Random inputs for `g` with its symbols bound as given. Floats are uniform in [-1, 1]; an
// integer input used as an index gets values valid for the dim it indexes.
Result<std::vector<HostTensor>> make_random_inputs(const Graph& g,
                                                   const std::map<std::string, int64_t>& binding,
                                                   uint64_t seed);

// Runs `exe` (a host or GPU executable whose data pointers must be host memory: host only).
Result<std::vector<HostTensor>> run_on_host(const Executable& exe,
                                            const std::vector<HostTensor>& inputs);

struct OutputCheck {
  std::string what;  // "output 0 bf16[5, 2048]"
  double max_abs_err = 0, max_rel_err = 0;
  bool ok = false;
  std::string message;
};

// Runs `exe` and reference_eval(g) on the same inputs; compares every output with the default
// tolerance of its dtype, loosened by `tolerance_scale`.
Result<std::vector<OutputCheck>> check_against_reference(const Graph& g, const Executable& exe,
                                                         const std::vector<HostTensor>& inputs,
                                                         double tolerance_scale = 1.0);

}  // namespace dg
