// Shared by the driver double's tests: the environment that puts the double in place of
// libcuda.so.1 (set before anything opens the driver), its control functions, and compiling a
// graph both for the host (the emulation the double runs) and for the simulated GPU.
#pragma once
#include <string>

#include "ir/graph.h"
#include "runtime/compiler.h"
#include "runtime/reference/host_tensor.h"
#include "tests/common/fixtures.h"

namespace dg::driver_double {

using testing::load_fixture;
using testing::parse_or_fail;
using testing::resized_seed_text;

// The double's control surface (driver_double.h), reached through dlsym.
struct Double {
  const char* (*calls)() = nullptr;
  void (*clear_calls)() = nullptr;
  void (*set_execute)(int) = nullptr;
  void (*inject_fault)(int, int) = nullptr;
  void (*clear_faults)() = nullptr;
};
const Double& the_double();

// The graph text with every bf16 (inputs, values, casts) made f32: its reference evaluation is
// the exact result to within f32 rounding, for bf16 inputs converted with to_f32.
std::string promoted_to_f32(const std::string& text);
std::vector<HostTensor> to_f32(const std::vector<HostTensor>& tensors);

// "" when `a` and `b` hold the same bytes, else the first element that differs.
std::string bitwise_difference(const HostTensor& a, const HostTensor& b);

// Compiles `g` for the host (so the double finds its emulation) and then for `target` (a GPU
// target served by the double); returns the GPU outcome.
CompileOutcome compile_for_double(const Graph& g, const std::string& target = "cuda");
// Both executables: `host` runs the emulation directly, `gpu` through the double.
struct HostAndGpu {
  CompileOutcome host, gpu;
};
HostAndGpu compile_host_and_gpu(const Graph& g);
CompileRequest double_request(const std::string& target);

// The recorded calls whose lines start with one of the driver calls that matter for a launch
// (module loads, function lookups, launches, copies, synchronizations), in order.
std::string launch_calls(const std::string& calls);

}  // namespace dg::driver_double
