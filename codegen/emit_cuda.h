// Codegen entry point: one graph -> one CUDA C++ translation unit and its launch plan.
#pragma once
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

// The graph must verify. Static dims are literals in the source; symbols are the trailing
// `long long` arguments of every kernel (see KernelPlan::symbols).
KernelPlan emit_cuda(const Graph& g);

}  // namespace dg
