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

// How run_on_host labels its host buffers. A GPU executable is run only with `cuda_device` set,
// which passes host memory as that CUDA device's memory: meaningful only under the tests' driver
// double, whose device memory is host memory. `host_scalars` lists rank-0 inputs passed as host
// tensors beside them (Note [Host scalars]).
struct HostRunOptions {
  int cuda_device = -1;
  std::vector<int> host_scalars;
};

// Runs `exe` on host buffers (see HostRunOptions for a GPU executable).
Result<std::vector<HostTensor>> run_on_host(const Executable& exe,
                                            const std::vector<HostTensor>& inputs,
                                            const HostRunOptions& options = {});

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
                                                         double tolerance_scale = 1.0,
                                                         const HostRunOptions& options = {});

}  // namespace dg
