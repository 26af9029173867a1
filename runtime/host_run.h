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
  // The stream a GPU executable launches on (tests: Note [One stream at a time]).
  void* stream = nullptr;
};

// Runs `exe` on host buffers (see HostRunOptions for a GPU executable).
Result<std::vector<HostTensor>> run_on_host(const Executable& exe,
                                            const std::vector<HostTensor>& inputs,
                                            const HostRunOptions& options = {});

struct OutputCheck {
  std::string what;  // "output 0 bf16[5, 2048]"
  double max_abs_err = 0, max_rel_err = 0;
  double largest_reference = 0;  // the largest finite |value| of the reference output
  bool ok = false;
  std::string message;
};

// Note [Tolerance at the tensor's scale]
// Fusion moves rounding points: a K-concatenated GEMM rounds once where the graph rounded each
// product before adding (Note [K-concatenated GEMMs]), and weight gradients are summed per token
// chunk. Where the terms cancel, the difference is an ulp of the terms, not of the (small)
// result, so an element-wise relative check fails on right values (the seed backward's grad_x,
// `dyngen run` at any token count). At the tensor's scale, the absolute part of the dtype's
// default tolerance is relative to the largest magnitude of the expected tensor:
//   |a - e| <= rtol |e| + atol max(1, max |e|).
// The dtype is the output's, or the graph's least precise float dtype where that is looser: an
// f32 output computed from bf16 intermediates moves with them when a reordered sum moves one by
// a bf16 ulp (the split-K rank-r products, Note [Rank-r products], change the seed backward's
// f32 LoRA weight gradients by ~0.5%).
// Element-wise (the default) stays the check for graphs whose kernels keep every rounding point.
enum class ToleranceMode { kElementwise, kTensorScale };

// The float dtype of `g`'s tensors with the loosest default tolerance (f32 when there is none).
DType least_precise_float(const Graph& g);

// The dtype's default tolerance, loosened by `tolerance_scale`, in the given mode; at the
// tensor's scale, the tolerance of `graph_dtype` where that is looser.
CompareResult compare_to_reference(const HostTensor& actual, const HostTensor& expected,
                                   ToleranceMode mode, double tolerance_scale = 1.0,
                                   DType graph_dtype = DType::kF64);

// Runs `exe` and reference_eval(g) on the same inputs; compares every output with
// compare_to_reference.
Result<std::vector<OutputCheck>> check_against_reference(
    const Graph& g, const Executable& exe, const std::vector<HostTensor>& inputs,
    double tolerance_scale = 1.0, const HostRunOptions& options = {},
    ToleranceMode mode = ToleranceMode::kElementwise);

}  // namespace dg
