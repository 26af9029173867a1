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

// Note [GPU facts]
// The peaks are the public spec sheets' (dense, no sparsity): H200 989 TFLOP/s bf16 (132 SMs x
// 1.83 GHz x 4096 FLOP/clk/SM, KERNELS.md), 67 TFLOP/s fp32, 4.8 TB/s HBM3e; A100 SXM 312 TFLOP/s
// bf16 (108 SMs x 1.41 GHz x 2048 FLOP/clk/SM), 19.5 TFLOP/s fp32, 2.0 TB/s (2.04 for the 80 GB
// part). The per-SM limits are the CUDA C Programming Guide's compute-capability table (9.0 and
// 8.0): 4 warp schedulers per SM, each issuing one warp-instruction per clock; 64K 32-bit
// registers per SM, allocated per warp in units of 256; 228 KB of shared memory per SM on 9.0 (164
// KB on 8.0), 227 KB (163 KB) per block with the opt-in attribute, and 1 KB per block reserved by
// the system; at most 32 resident blocks and 64 resident warps (2048 threads) per SM.
// The rest are estimates, and say so where they are used: `mma_sync_fraction` is the share of the
// dense peak that warp-level mma.sync (SASS HMMA) can reach -- 1 on sm_80, where it is the native
// path; on sm_90 an ASSUMPTION of 2/3 (the peak needs wgmma; KERNELS.md budgets 0.35-0.75 of
// cuBLAS for an mma.sync path on H200, and Hopper microbenchmarks, e.g. Luo et al. 2024, measure
// mma.sync well below wgmma). Latencies in clocks are approximate public microbenchmark figures
// for H100/A100 (Chips and Cheese's H100 and A100 articles; ~30 L1 / shared memory, ~200 L2,
// ~600 DRAM) and an ASSUMED ~20 clocks per block-wide barrier. Shared memory serves 128 bytes per
// clock per SM (the CUDA guide's 32 banks of 4 bytes, one access each per clock). The
// `tensor_ceiling`, 0.73, is cuBLAS's measured share of the H200's peak (Note [Tensor-core
// ceiling] in perf_model.h); the A100's is ASSUMED the same.
struct GpuSpec {
  std::string name;         // "H200"
  double tensor_flops;      // dense bf16 tensor-core FLOP/s
  double simt_flops;        // fp32 FLOP/s on the CUDA cores
  double bytes_per_second;  // DRAM bandwidth
  // Per-SM facts for the achievable estimate (perf_model.h).
  int sms = 0;
  double clock_hz = 0;  // the clock the peaks above are computed at
  int schedulers_per_sm = 4;
  int registers_per_sm = 65536;
  int register_unit_per_warp = 256;  // registers are allocated per warp in multiples of this
  int64_t shared_bytes_per_sm = 0;
  int64_t shared_bytes_per_block = 0;  // opt-in maximum, static plus dynamic
  int64_t shared_reserved_per_block = 1024;
  int max_blocks_per_sm = 32;
  int max_warps_per_sm = 64;
  double mma_sync_fraction = 1;  // share of tensor_flops HMMA (mma.sync) reaches; see above
  double tensor_ceiling = 0.73;  // the most of tensor_flops any MMA path is charged
  double shared_bytes_per_clock = 128;
  double l1_latency_clocks = 30, l2_latency_clocks = 200, dram_latency_clocks = 600;
  double barrier_clocks = 20;
};

// "h200" or "a100" (any case); nullopt otherwise.
std::optional<GpuSpec> find_gpu(const std::string& name);
// The accepted names, for messages: "h200, a100".
std::string known_gpus();

struct KernelEstimate {
  const KernelLaunch* kernel = nullptr;
  bool launched = false;  // false: a zero grid extent at this binding, skipped at run time
  double flops = 0, tensor_flops = 0, bytes = 0;
  double mma_terms = 1;  // MMA FLOPs per tensor FLOP (KernelLaunch::split_terms)
  // Note [Epilogue MMAs] (perf_model.h): f32 FLOPs of `flops` the epilogue runs on tensor cores,
  // as epilogue_mma_terms bf16 MMAs each (KernelLaunch::epilogue_mma_flops).
  double epilogue_mma_flops = 0, epilogue_mma_terms = 0;
  double ctas = 0;  // the grid's blocks, all three extents multiplied
  double compute_seconds = 0, memory_seconds = 0;
  double seconds() const {
    return compute_seconds > memory_seconds ? compute_seconds : memory_seconds;
  }
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
