// Internal: pieces of kernel source, and of launch records, shared by the GEMM emitters (the
// mma.sync, wgmma, scalar, rank-r and grouped kernels): the epilogue lambda and its stores, the
// staging of rank-r operands, the kernel's header, per-problem selection in grouped kernels, and
// the launches of a GEMM's tile variants.
#pragma once
#include <string>
#include <vector>

#include "codegen/gemm_spec.h"
#include "codegen/tile_choice.h"

namespace dg {

// `auto <name> = [&](long long row, int col, <acc> acc0[, <acc> acc1][, dg_rank], const auto&
// dg_st) { <spec.epilogue> };`, with the values of the epilogue's rank-r products defined first:
// read from global memory through accessors declared before the lambda, or, when `staged`
// (Note [Staged rank-r epilogue]), from the parameter `const float (&dg_rank)[products]` that
// dg_gemm_epilogue_rank passes. `dg_st` are its stores: DgDirectStores{} from a caller that has
// one column per lane, a half of a pair from the tensor-core epilogues (Note [Paired stores]).
std::string epilogue_lambda(const GemmKernelSpec& spec, const std::string& acc,
                            const std::string& name = "epi", bool staged = false);
// Whether a tensor-core epilogue over `spec` can store in pairs (Note [Paired stores] in
// codegen/device/dg_store.cuh): N is even and some output is bf16, f16 or f32.
bool pairs_outputs(const GemmKernelSpec& spec);
// Declares `dg_stores`, the stores for a tensor-core epilogue over `spec`: paired when `pair` and
// pairs_outputs(spec) (the paired outputs' base addresses join `params`' checked operands, which
// the host checks before the launch: Note [GEMM fallbacks] in kernel_plan.h), direct otherwise;
// with the epilogue's operands, paired likewise (codegen/epilogue_operands.h).
std::string epilogue_stores(const GemmKernelSpec& spec, KernelParams& params, bool pair = true);
// Copies the block's rows of each product's U and columns of its B into `dg_scratch` (floats, at
// `offsets`; Note [Staged rank-r epilogue]), then a barrier, and declares dg_rank_at, the
// products' copies. Needs m0, n0, M, N and a Tile with BM, BN and kThreads in scope.
std::string rank_staging_code(const std::vector<EpilogueProduct>& products,
                              const std::vector<int64_t>& offsets);
// `extern "C" __global__ void __launch_bounds__(threads) name(params, symbols) {`
std::string kernel_header(const std::string& name, int threads, const KernelParams& params,
                          const LoweringContext& ctx);
// `values[p]` for the block's problem (`problem` in scope): the value itself when all agree.
std::string by_problem(const std::vector<std::string>& values);
// code[p] run by the blocks of problem p; `problem` < the problem count, so the last problem is
// the plain `else`.
std::string branch_by_problem(const std::vector<std::string>& code);

// ---- the launches of a GEMM's tile variants (Note [Tile choice] in tile_choice.cc) ----
// A variant kernel's name after its GEMM's first: "_tile32x64".
std::string variant_suffix(const TileConfig& t);
// ", for M <= 512" when the GEMM has several variants.
std::string range_tag(const std::vector<TileVariant>& variants, size_t v);
// The launch of variant v of a GEMM whose first kernel is named `base`: its name, tile grid over
// M x N, `z` blocks on gridDim.z for the calls that run it (none for the others), its threads.
KernelLaunch variant_launch(const std::string& base, const std::vector<TileVariant>& variants,
                            size_t v, const SymExpr& M, const SymExpr& N, const SymExpr& z,
                            int threads);

}  // namespace dg
