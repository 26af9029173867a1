// An ESTIMATE of eager PyTorch running a graph unfused, for `dyngen plan --baseline eager`.
//
// Note [Eager baseline]
// Eager runs the graph as it comes in (before any pass): one ATen call per node. Scalar constants
// are Python numbers (no call); views (reshape, permute, expand, slice) are calls without a kernel;
// every other node is a call and one kernel. The host spends `kEagerDispatchSeconds` per call (an
// ESTIMATE of PyTorch's per-op Python + dispatcher + launch cost, "a few us"; a review of the
// kernels took ~5 us, 300 us for ~60 ops host-bound). The GPU runs the kernels in order, each
// starting when both its call has been made and the previous kernel is done, and each costing the
// launch gap (kLaunchSeconds of perf_model.h's Note [Achievable estimate], the same as dyngen's)
// plus its time:
//  - a contraction runs as cuBLAS at its published large-shape efficiency -- bf16 at 0.80 of the
//    dense tensor peak (KERNELS.md: a torch bf16 matmul measured ~790 of 989 TFLOP/s on the H200;
//    cuBLAS 720 TFLOP/s fp16 at 2048x8192x8192), fp32 (TF32 off, PyTorch's default for matmul) at
//    an ASSUMED 0.75 of the fp32 peak -- times its wave utilisation: 128x128 output tiles, split
//    over K (in 256-deep slices at most) while the tiles do not fill the SMs, the last wave
//    partly empty. Bounded below by its operand and result bytes at DRAM bandwidth;
//  - anything else reads its inputs and writes its output at DRAM bandwidth (its FLOPs at the fp32
//    peak when that is longer).
// The estimate is the time the last kernel ends (or the last call, if later).
#pragma once
#include <map>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "runtime/model/roofline.h"

namespace dg {

constexpr double kEagerDispatchSeconds = 5e-6;  // an estimate: Note [Eager baseline]
constexpr double kCublasBf16Efficiency = 0.80;  // KERNELS.md's measured torch bf16 matmul
constexpr double kCublasF32Efficiency = 0.75;   // an assumption: Note [Eager baseline]

struct EagerEstimate {
  int calls = 0;              // ATen calls (views included)
  int kernels = 0;            // of which launch a kernel
  double host_seconds = 0;    // calls x dispatch
  double device_seconds = 0;  // the kernels' times and launch gaps, summed
  double gemm_seconds = 0;    // of which contractions
  double seconds = 0;         // the timeline's end
};

// Evaluates the graph's shapes under `bindings`; an error in *error when one cannot be evaluated.
std::optional<EagerEstimate> estimate_eager(const Graph& g,
                                            const std::map<std::string, int64_t>& bindings,
                                            const GpuSpec& gpu, double launch_seconds,
                                            std::string* error);

// cuBLAS's time for one [M, K] x [K, N] contraction (batch GEMMs: batch x tiles), per the Note.
double cublas_seconds(double m, double n, double k, double batch, bool bf16, double bytes,
                      const GpuSpec& gpu);

}  // namespace dg
