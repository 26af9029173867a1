// Internal: tensor-core GEMMs on mma.sync (sm_80 and up; Note [Tensor-core GEMM] in
// codegen/device/dg_gemm_sm80.cuh), for specs tensor_core_eligible (codegen/gemm.h) accepts.
#pragma once
#include <string>

#include "codegen/gemm_spec.h"
#include "codegen/tile_choice.h"

namespace dg {

// The GEMM's kernels: one per tile variant of tile_variants (Note [Tile choice] in
// tile_choice.cc), then the fallback.
void emit_mma_sync_gemm(LoweringContext& ctx, GemmKernelSpec& spec);

// The mma.sync kernel of tile t for a tensor-core spec, under `launch` (its name, grid, variant,
// runs and flags set); `range` ends the summary's tile tag (", for M <= 512" or "").
void emit_mma_sync_kernel(LoweringContext& ctx, GemmKernelSpec& spec, KernelLaunch launch,
                          const TileConfig& t, const std::string& range);

// The GEMM's fallback kernel (Note [GEMM fallbacks] in kernel_plan.h): mma.sync with the default
// tile for every M, element stores, as variant `variant` of the GEMM whose first kernel is `base`.
// Emitted after every other kernel of the GEMM.
void emit_gemm_fallback(LoweringContext& ctx, GemmKernelSpec& spec, const std::string& base,
                        int variant);

}  // namespace dg
