// Shared by the driver double's tests: the environment that puts the double in place of
// libcuda.so.1 (set before anything opens the driver), its control functions, and compiling a
// graph both for the host (the emulation the double runs) and for the simulated GPU.
#pragma once
#include <string>

#include "ir/graph.h"
#include "runtime/compiler.h"

namespace dg::driver_double {

// The double's control surface (driver_double.h), reached through dlsym.
struct Double {
  const char* (*calls)() = nullptr;
  void (*clear_calls)() = nullptr;
  void (*set_execute)(int) = nullptr;
  void (*inject_fault)(int, int) = nullptr;
  void (*clear_faults)() = nullptr;
};
const Double& the_double();

Graph load_fixture(const std::string& name);
Graph parse(const std::string& text);

// Compiles `g` for the host (so the double finds its emulation) and then for `target` (a GPU
// target served by the double); returns the GPU outcome.
CompileOutcome compile_for_double(const Graph& g, const std::string& target = "cuda");
CompileRequest double_request(const std::string& target);

// The recorded calls whose lines start with one of the driver calls that matter for a launch
// (module loads, function lookups, launches, copies, synchronizations), in order.
std::string launch_calls(const std::string& calls);

}  // namespace dg::driver_double
