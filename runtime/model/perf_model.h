// The achievable time of one kernel launch on a named GPU: an ESTIMATE from the kernel's grid, its
// ptxas report and its own SASS, beside the roofline bound (roofline.h).
//
// runtime/model is dyngen's performance model, what `dyngen plan` prints: the GPUs' figures and
// the roofline (roofline.h), occupancy (occupancy.h), reading SASS (sass_tools.h, sass_stats.h),
// this estimate, and eager PyTorch's (eager_baseline.h). Nothing in the compile path depends on it.
// What the model reads from codegen: kernel_cost (codegen/kernel_cost.h), each kernel's symbolic
// FLOPs and bytes, which stays in codegen because lowering records it in the kernel plan
// (codegen/kernel_plan.h) and codegen cannot depend on runtime/. What it reads from the runtime:
// ptxas's report (runtime/ptxas_report.h), which the compile path parses and caches.
//
// Note [Achievable estimate]
// At a binding of the symbols a launch has C blocks (CTAs) of W warps; the GPU has S SMs and holds
// B of these blocks per SM (occupancy.h), so it runs in waves = ceil(C / (S * B)) with R =
// min(B, ceil(C / S)) blocks on the busiest SM. Every bound below is the busiest SM's work over
// that SM's rate, per wave, times the waves: a kernel with fewer blocks than SMs leaves the rest
// idle, and none of its bounds can use them.
//  - tensor: the block's tensor FLOPs at the SM's share of the tensor peak, scaled by
//    `mma_sync_fraction` when the SASS shows HMMA rather than HGMMA (Note [GPU facts]); plus
//    simt: the block's other FLOPs at the SM's share of the fp32 peak (the two pipes are summed,
//    as in the roofline).
//  - issue: the block's dynamic warp-instructions at one per scheduler per clock, with at most
//    R * W warps to issue from. Dynamic counts come from the SASS (Note [Loops in SASS]): the main
//    MMA loop runs tensor_flops / (its MMA FLOPs per iteration) iterations in all, the SIMT work
//    loops share the FFMAs of the kernel's fp32 contractions (2 FLOPs per lane), and the other
//    instructions run once per warp, one side of each branch (the longest path: Note [Longest
//    path] in sass_stats.h). The main loop's instructions per MMA is reported.
//  - memory: the compulsory bytes at the DRAM bandwidth (the roofline's memory time).
//  - latency: a floor for serial loops. One warp's iteration of a loop takes at least its
//    instructions (one a clock), plus each barrier, plus the latency of a load the same iteration
//    consumes (Note [Loops in SASS]): a global load staged into shared memory is a first touch
//    for its CTA, from DRAM for the compulsory share of the bytes the loops load (compulsory
//    bytes over loaded bytes) and from L2 for the rest (tiles other CTAs load too); a global load
//    used directly (an epilogue's rank-r operands, re-read by every element) is an L1 hit -- an
//    ASSUMPTION that such re-read operands are small; a shared-memory load costs the L1 latency.
//    A warp runs its iterations one after another, and the waves one after another.
//  - launch: a fixed cost per launch, added (KERNELS.md: a launch costs 3-5 us; the low end, 3 us,
//    is taken because a stream's back-to-back launches overlap the host's share).
// estimated = launch + max(tensor + simt, issue, memory, latency). It is at least the roofline
// bound, since every term is a per-SM share of a whole-GPU figure. Without the SASS (no cuobjdump)
// the issue and latency bounds are left out and the report names them; without the ptxas report the
// register limit of the occupancy is left out and named likewise.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "runtime/model/roofline.h"
#include "runtime/model/sass_stats.h"
#include "runtime/ptxas_report.h"

namespace dg {

constexpr double kLaunchSeconds = 3e-6;  // Note [Achievable estimate]
// Note [Underfilled kernels]
// The bar: no kernel with more than 50 MFLOP launches fewer CTAs than the GPU has SMs at s = 512;
// the model flags every such launch.
constexpr double kUnderfillFlops = 50e6;

struct KernelModelInput {
  const KernelEstimate* roofline = nullptr;  // launched, FLOPs, bytes, CTAs, roofline seconds
  int threads_per_block = 0;
  int64_t dynamic_shared_bytes = 0;
  double simt_contraction_flops = 0;           // the fp32 contractions' FLOPs (FFMA work)
  const KernelResources* resources = nullptr;  // ptxas's report; null when there is none
  const SassStats* sass = nullptr;             // null when the SASS could not be read
  std::string no_sass_reason = "cuobjdump not found or failed";  // when sass is null
};

struct KernelModel {
  double ctas = 0, waves = 0;
  int ctas_per_sm = 0, warps_per_cta = 0, registers = -1;
  int64_t shared_bytes = 0;  // static plus dynamic, per block
  std::string occupancy_limit;
  std::optional<double> instructions_per_mma;  // tensor-core kernels with a main MMA loop
  int main_loop_inner_loops = 0;
  double tensor_seconds = 0, simt_seconds = 0, memory_seconds = 0;
  std::optional<double> issue_seconds, latency_seconds;  // need the SASS
  double launch_seconds = 0, estimated_seconds = 0, roofline_seconds = 0;
  std::string limiter;               // the largest bound: "tensor", "issue", "memory", ...
  bool underfills_gpu = false;       // Note [Underfilled kernels]
  std::vector<std::string> missing;  // fields the model could not fill, and why
};

KernelModel model_kernel(const KernelModelInput& in, const GpuSpec& gpu);

}  // namespace dg
