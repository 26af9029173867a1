// A roofline estimate of a kernel plan for a named GPU, at one binding of the graph's symbols.
//
// Note [Roofline estimate]
// Each kernel takes max(compute time, memory time): compute is its tensor-core-eligible FLOPs at
// the GPU's dense bf16 tensor-core peak plus its other FLOPs at the fp32 SIMT peak; memory is its
// compulsory bytes (Note [Kernel cost model]) at the peak DRAM bandwidth. It is a lower bound on
// an ideal kernel, not a prediction: launch latency, tails, occupancy, caches and the kernel's
// actual instruction mix are not modelled. Launches whose grid has a zero extent at the binding
// are skipped at run time, so they count neither as launches nor in the totals.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_plan.h"

namespace dg {

struct GpuSpec {
  std::string name;         // "H200"
  double tensor_flops;      // dense bf16 tensor-core FLOP/s
  double simt_flops;        // fp32 FLOP/s on the CUDA cores
  double bytes_per_second;  // DRAM bandwidth
};

// "h200" or "a100" (any case); nullopt otherwise.
std::optional<GpuSpec> find_gpu(const std::string& name);
// The accepted names, for messages: "h200, a100".
std::string known_gpus();

struct KernelEstimate {
  const KernelLaunch* kernel = nullptr;
  bool launched = false;  // false: a zero grid extent at this binding, skipped at run time
  double flops = 0, tensor_flops = 0, bytes = 0;
  double compute_seconds = 0, memory_seconds = 0;
  double seconds() const { return compute_seconds > memory_seconds ? compute_seconds : memory_seconds; }
  bool memory_bound() const { return memory_seconds >= compute_seconds; }
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }  // FLOP per byte
};

struct PlanEstimate {
  std::vector<KernelEstimate> kernels;  // in launch order, skipped ones included
  int launches = 0;
  double flops = 0, tensor_flops = 0, bytes = 0, seconds = 0;
  double workspace_bytes = 0;
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

// Evaluates the plan's expressions under `bindings` (symbol name -> value). Returns an error
// message in *error when an expression cannot be evaluated (an unbound symbol, overflow).
std::optional<PlanEstimate> estimate_plan(const KernelPlan& plan,
                                          const std::map<std::string, int64_t>& bindings,
                                          const GpuSpec& gpu, std::string* error);

}  // namespace dg
