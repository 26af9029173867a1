// Internal: pieces of the mma.sync kernels' source (Note [Tensor-core GEMM] in
// codegen/device/dg_gemm_sm80.cuh), shared by the one-GEMM kernels (emit_mma_sync_gemm.cc) and the
// grouped ones (emit_grouped_gemm.cc). Each piece expects `typedef DgGemmTile<...> Tile;` and the
// names the comments list in scope.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "codegen/gemm_spec.h"
#include "codegen/tile_choice.h"

namespace dg {

// "DgGemmTile<BM, BN, BK, WARPS_M, WARPS_N, STAGES>" for tile t.
std::string tile_template(const TileConfig& t);
// The start of a summary's tile tag: "[tensor cores 128x128x32, 3 stages".
std::string tc_tag(const TileConfig& t);
// "Tile, AT, BKN, NB": the template arguments of dg_gemm_smem and DgGemmStageCopies.
std::string tc_tile_args(bool at, bool bkn, int nb);

// Note [Staged rank-r epilogue] (codegen/device/dg_epilogue.cuh): where each product's copies go
// in the main loop's shared memory, in floats from its start; nullopt when there are no products,
// one is not f32 or has another K than the first, or the copies do not fit.
std::optional<std::vector<int64_t>> rank_staging(const std::vector<EpilogueProduct>& products,
                                                 const TileConfig& t, bool at, bool bkn, int nb);
// A static check that a problem's staged copies fit the main loop's shared memory.
std::string scratch_fits(const std::vector<EpilogueProduct>& products,
                         const std::vector<int64_t>& offsets, const std::string& tile_args);
// The scratch for staged copies: the main loop's shared memory, as floats (`dg_scratch`).
std::string scratch_pointer(const std::string& tile_args);

// The block's tile origin (m0, n0) and its zeroed tensor-core accumulators; blocks past M or N
// return (uniform over the block).
std::string tc_block_setup(const std::string& nb);
// One call of dg_gemm_mainloop over A (`a`, leading dimension `lda`) and the B pointers `b`
// (`ldb`) for K, into `acc`; `aligned_only` when the kernel reads 16-byte aligned operands only.
std::string tc_mainloop(const std::string& nb, bool at, bool bkn, const std::string& a,
                        const std::string& lda, const std::string& b, const std::string& ldb,
                        const std::string& K, bool aligned_only);
// After the main loops: `dg_sum`, the accumulators summed over the tile's K slices in the layout
// of Tile::Epilogue (Note [Sliced K] in codegen/device/dg_gemm_tile_sm80.cuh; without slices a
// copy, which the compiler folds away).
std::string tc_sum_slices(const std::string& nb, const std::string& tile_args);
// The epilogue over `dg_sum`, its stores declared first (epilogue_stores): with the staged
// products' values in registers (after rank_staging_code) or plain.
std::string epilogue_call(const GemmKernelSpec& spec, KernelParams& params, bool staged,
                          const std::string& epi, bool pair = true);

}  // namespace dg
