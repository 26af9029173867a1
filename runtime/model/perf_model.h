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
// R of these blocks per SM (occupancy.h), so it runs in waves = ceil(C / (S * R')) with R' =
// min(R, ceil(C / S)) blocks on the busiest SM. Every figure below is the busiest SM's work over
// that SM's rate, per wave, times the waves: a kernel with fewer blocks than SMs leaves the rest
// idle, and none of its bounds can use them.
//  - tensor: the block's tensor FLOPs at the SM's share of the dense peak times the fraction its
//    MMAs can reach (Note [Tensor-core ceiling]); simt: its other FLOPs at the SM's share of the
//    fp32 peak.
//  - issue: the block's dynamic warp-instructions at one per scheduler per clock, with at most
//    R' * W warps to issue from. Dynamic counts come from the SASS (Note [Loops in SASS]): the main
//    MMA loop runs tensor_flops x mma_terms (KernelLaunch::split_terms, 1 for bf16 operands) /
//    (its MMA FLOPs per iteration) iterations in all, the tensor time counts those MMAs, the SIMT
//    work loops share the FFMAs of the kernel's fp32 contractions (2 FLOPs per lane), and the other
//    instructions run once per warp, one side of each branch (Note [Longest path]).
//  - shared: the main loop's shared-memory traffic at the SM's shared-memory bandwidth (Note
//    [Shared-memory operand bandwidth]).
//  - memory: the compulsory bytes at the DRAM bandwidth (the roofline's memory time).
//  - latency: one warp's serial time. An iteration of a counted loop takes at least its
//    instructions (one a clock), plus each barrier, plus one latency per round of loads it waits
//    for in series (Note [Serial loads]): a staged global load (a first touch for its CTA) from
//    DRAM for the compulsory share of the bytes the loops load (compulsory bytes over loaded
//    bytes) and from L2 for the rest; a global load used directly inside a loop (an operand every
//    element re-reads) an L1 hit -- an ASSUMPTION that such operands are small -- and in straight
//    code an L2 hit (first touched by this warp, loaded by other blocks too); a shared-memory load
//    the L1 latency. The straight code's rounds count once per warp. Warps run their own
//    instructions one after another, and the waves one after another.
//  - launch: a fixed cost per launch, added (KERNELS.md: a launch costs 3-5 us; the low end, 3 us,
//    is taken because a stream's back-to-back launches overlap the host's share).
// A kernel with a main MMA loop is also timed as phases in series (Note [Phases in series]);
// estimated = launch + max(the bounds, the phases' figure, the roofline bound). Without the SASS
// (no cuobjdump) the issue, shared, latency and phase figures are left out and the report names
// them; without the ptxas report the register limit of the occupancy is left out and named
// likewise.
//
// Note [Tensor-core ceiling]
// No kernel is modelled faster than the best libraries run: cuBLAS reaches 720 TFLOP/s of the
// H200's 989 (fp16, 2048x8192x8192, KERNELS.md), 0.73 of the dense peak, so every tensor-core
// MMA is charged at most `GpuSpec::tensor_ceiling` = 0.73 of the peak, wgmma included (HGMMA's
// peak needs a pipeline no generated kernel has been measured to keep full). HMMA (mma.sync) is
// charged min(mma_sync_fraction, ceiling) (Note [GPU facts]). And a block of W warps issues MMAs
// on at most W of the SM's four sub-partitions' tensor units: with R' blocks resident the SM's
// tensor rate is scaled by min(1, R' * W / 4) (a one-warp CTA alone on an SM reaches a quarter).
// The eager baseline's cuBLAS keeps its measured 0.80 (Note [Eager baseline]): it is what torch
// reached on that GPU, at the shapes where cuBLAS is best.
//
// Note [Shared-memory operand bandwidth]
// A main loop reads its MMA operands from shared memory, which serves an SM 128 bytes a clock
// (Note [GPU facts]): ldmatrix moves 128 bytes per 8x8 matrix, LDS and STS their width times 32
// lanes, an HGMMA.64xNx16 reads B's N x 16 bf16 and, unless A comes from registers, A's 64 x 16
// (both once per warpgroup). So a 128x64 tile with two B operands (gate and up) reads ~128 bytes
// a clock at the full tensor rate, the hardware's limit (KERNELS.md's second review). TMA's
// writes into shared memory are not counted (their size is in the tensor map, not the SASS).
//
// Note [Phases in series]
// At one block per SM nothing overlaps a block's phases: the prologue (setup, the rank-r operands
// staged by threads), the main MMA loop and the epilogue (the accumulators' math and stores) run
// one after another, each at its own limit. So a kernel with a main MMA loop is also timed as the
// sum of its phases for the busiest SM: the prologue and epilogue from their instructions on the
// longest path (issue rate) or their serial loads (latency), whichever is longer -- the epilogue
// also at least its SIMT FLOPs -- and the main loop as the largest of its tensor, issue, shared,
// memory and latency figures plus one staging latency to fill its pipeline. With R' blocks
// resident, the other blocks run their phases while one waits, and the figure is the overlapped
// bounds' plus (phases - overlapped) / R' -- an ASSUMPTION, exact at R' = 1 and tending to the
// overlapped bounds as blocks are added. A loop outside the counted ones lies on the path once
// (its trip count is not in the SASS): the phase is then a lower bound, and the plan says so.
//
// Note [Epilogue MMAs]
// An sm_90a GEMM runs its rank-r products (LoRA's U @ B^T, f32) in the epilogue as bf16 splits on
// tensor cores, three wgmmas per product (Note [Rank-r products on tensor cores] in
// codegen/device/dg_gemm_sm90.cuh). Their FLOPs are not the main loop's tensor_flops (its
// iteration count would grow by them), nor SIMT work (the model charged them at the fp32 peak,
// 25 us of Phi-3.5-MoE's gate/up kernel at s = 4096 where the SASS holds 24 HGMMA.64x32x16): the
// kernel names them (KernelLaunch::epilogue_mma_flops, split terms), the epilogue phase takes
// their tensor time (FLOPs x terms at the kernel's tensor fraction) beside its SIMT FLOPs, each
// on its own unit, and the compute bound adds them. Their instructions count in the epilogue's
// issue figure like any other.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "runtime/model/roofline.h"
#include "runtime/model/sass_phases.h"
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

// One phase of a block (Note [Phases in series]), for the busiest SM over all its waves.
struct PhaseModel {
  std::string name;  // "prologue", "main loop", "epilogue"
  double seconds = 0;
  std::string limiter;                                  // which figure sets `seconds`
  std::vector<std::pair<std::string, double>> figures;  // every figure taken, by name
  int instructions_per_warp = 0;                        // per warp; the main loop's: per iteration
  double iterations_per_warp = 0;                       // the main loop's
  SerialLoads serial;                                   // per warp; the main loop's: per iteration
  int rolled_loops = 0;  // loops counted once: the phase is a lower bound
};

// A loop the model counts by its iterations (Note [Achievable estimate]).
struct LoopModel {
  std::string kind;  // "main MMA loop" or "SIMT loop"
  int64_t address = 0;
  double iterations_per_warp = 0;
  int instructions = 0;  // per iteration, inner loops once
  int inner_loops = 0;   // counted once an iteration: the figures are lower bounds
  SerialLoads serial;    // per iteration
};

struct KernelModel {
  double ctas = 0, waves = 0;
  int ctas_per_sm = 0, warps_per_cta = 0, registers = -1;
  int64_t shared_bytes = 0;  // static plus dynamic, per block
  std::string occupancy_limit;
  // Tensor-core kernels with a main MMA loop: the loop's SASS instructions per MMA instruction
  // (an HGMMA.64x128x16 is one), and per m16n8k16's FLOPs (an HGMMA.64x128x16 makes sixteen).
  std::optional<double> instructions_per_mma, instructions_per_m16n8k16;
  int main_loop_inner_loops = 0;
  double tensor_fraction = 1;  // of the SM's dense peak (Note [Tensor-core ceiling])
  std::string tensor_fraction_why;
  double tensor_seconds = 0, simt_seconds = 0, memory_seconds = 0;
  double epilogue_tensor_seconds =
      0;  // Note [Epilogue MMAs]: in the compute bound and the epilogue
  std::optional<double> issue_seconds, latency_seconds, shared_seconds;  // need the SASS
  std::vector<LoopModel> loops;          // the loops counted by iterations
  std::vector<PhaseModel> phases;        // Note [Phases in series]; empty without a main MMA loop
  double overlapped_seconds = 0;         // the largest bound
  std::optional<double> phased_seconds;  // the phases' figure, with R' blocks resident
  double launch_seconds = 0, estimated_seconds = 0, roofline_seconds = 0;
  std::string limiter;  // what sets the estimate: "tensor", "issue", "memory", "phases", ...
  bool underfills_gpu = false;       // Note [Underfilled kernels]
  std::vector<std::string> missing;  // fields the model could not fill, and why
};

KernelModel model_kernel(const KernelModelInput& in, const GpuSpec& gpu);

}  // namespace dg
