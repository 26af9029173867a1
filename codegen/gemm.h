// Internal: GEMM kernels with an epilogue, on tensor cores (codegen/device/dg_gemm.cuh) when the
// operands allow it and on the scalar tile otherwise (Note [Simple GEMM] in emit_matmul.cc).
#pragma once
#include <string>
#include <vector>

#include "codegen/lowering.h"
#include "codegen/tile_choice.h"

namespace dg {

// Pointer parameters of one kernel, in order; a buffer read twice is passed once.
class KernelParams {
 public:
  // The parameter's name; `output` makes it writable.
  std::string add(BufferRef buffer, DType dtype, bool output);
  // As add, for a read whose address (buffer + offset elements) the kernel checks for 16-byte
  // alignment at run time; the launch reports it (Note [Unaligned operands] in kernel_plan.h).
  // Returns that address as a C expression, "p1 + offset".
  std::string add_checked(BufferRef buffer, DType dtype, const SymExpr& offset);
  // Records that the kernel writes `buffer` (already a parameter) in pairs of `dtype` elements
  // when its base is aligned to a pair, checked at run time (Note [Paired stores] in
  // codegen/device/dg_store.cuh).
  void check_paired_output(BufferRef buffer, DType dtype);
  std::string declaration() const;  // "T* __restrict__ o0, const U* __restrict__ p1, ..."
  const std::vector<BufferRef>& buffers() const { return buffers_; }
  const std::vector<CheckedOperand>& checked_operands() const { return checked_; }

 private:
  // The buffer's position among the parameters, adding it if it is new.
  int position(BufferRef buffer, DType dtype, bool output);

  std::vector<BufferRef> buffers_;
  std::vector<CheckedOperand> checked_;
  std::vector<std::string> names_, decls_;
};

// One GEMM operand read in place through strides: element (r, c) at
// buffer[offset + r * row_stride + c * col_stride]. A is (m, k), B is (k, n).
struct GemmOperandRef {
  BufferRef buffer;
  DType load_dtype = DType::kBF16;   // what the buffer holds
  DType value_dtype = DType::kBF16;  // the operand's dtype (differs when a cast is fused in)
  SymExpr offset, row_stride, col_stride;
  std::vector<SymExpr> batch_strides;  // scalar path only: one per batch dim
};

// One K range of a GEMM over a concatenated K (Note [K-concatenated GEMMs] in
// passes/concat_gemm_k.cc): its own A (m, k) and B (k, n) operands, k in [0, K).
struct GemmKSegment {
  GemmOperandRef a;
  std::vector<GemmOperandRef> b;
  SymExpr K;
};

// A rank-r product in a GEMM's epilogue (a LoRA update U @ B^T): value `name` at (row, col) is
// the sum over j < k of t[row * k + j] * w(col, j), with w a linear's weight [N][k] (w[col * k +
// j]) or a matmul's [k][N] (w[j * w_ld + col]). The epilogue reads t and w through the accessors
// <name>_t and <name>_w, which the kernel declares: over global memory, or over copies staged in
// shared memory (Note [Staged rank-r epilogue] in codegen/device/dg_epilogue.cuh).
struct EpilogueProduct {
  std::string name;  // unique in the kernel
  std::string t, w;  // pointer parameters
  int64_t k = 0;
  bool linear_weight = true;
  std::string w_ld;  // a matmul's leading dimension of w (C expression)
  std::string ct;    // the compute type
};

// An output the epilogue writes through dg_put<slot>(dg_st, address, value), slot its position
// in GemmKernelSpec::stores (Note [Paired stores] in codegen/device/dg_store.cuh).
struct EpilogueStore {
  BufferRef buffer;
  DType dtype;
  std::string param;  // the kernel's parameter name
};

struct GemmKernelSpec {
  std::string what, summary;
  std::vector<int> nodes;  // the graph nodes the kernel computes (KernelLaunch::nodes)
  SymExpr M, N, K;
  std::vector<SymExpr> batch;  // batch dims (scalar path only); blockIdx.z runs over them
  GemmOperandRef a;
  std::vector<GemmOperandRef> b;  // one, or two sharing A (Note [Fusion groups])
  DType acc_dtype = DType::kF32;
  KernelParams params;  // holds the epilogue's buffers; A and B are added by emit_gemm
  // Statements run for each (row, col) inside [0, M) x [0, N), with `long long row`, `int col`,
  // `acc0` (and `acc1` for two B operands) in scope, `c_base`, the batch's offset in C, and
  // `dg_st`, the stores its dg_put calls go through.
  std::string epilogue;
  std::vector<EpilogueProduct> products;  // the epilogue's rank-r products
  // The epilogue's outputs, in the order of their dg_put slots (Note [Paired stores]).
  std::vector<EpilogueStore> stores;
  // Empty, or the K segments accumulated one after another into the same accumulators (then `a`
  // and `b` are the first segment's and K is their sum).
  std::vector<GemmKSegment> k_segments;
};

// ---- pieces of kernel source shared by the GEMM emitters ----
// `auto <name> = [&](long long row, int col, <acc> acc0[, <acc> acc1][, dg_rank], const auto&
// dg_st) { <spec.epilogue> };`, with the values of the epilogue's rank-r products defined first:
// read from global memory through accessors declared before the lambda, or (`staged`, Note
// [Staged rank-r epilogue]) from the parameter `const float (&dg_rank)[products]` that
// dg_gemm_epilogue_rank passes. `dg_st` are its stores: DgDirectStores{} from a caller that has
// one column per lane, a half of a pair from the tensor-core epilogues (Note [Paired stores]).
std::string epilogue_lambda(const GemmKernelSpec& spec, const std::string& acc,
                            const std::string& name = "epi", bool staged = false);
// Whether a tensor-core epilogue over `spec` can store in pairs (Note [Paired stores] in
// codegen/device/dg_store.cuh): N is even and some output is bf16, f16 or f32.
bool pairs_outputs(const GemmKernelSpec& spec);
// Declares `dg_stores`, the stores for a tensor-core epilogue over `spec`: paired when `pair` and
// pairs_outputs(spec) (the paired outputs' base addresses join `params`' checked operands, which
// the host checks before the launch: Note [GEMM fallbacks] in kernel_plan.h), direct otherwise.
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

// True when the tensor-core kernel can take the spec: bf16 operands, static N and K, 16-byte
// multiples along every operand's contiguous dim and leading dimension, no batch.
bool tensor_core_eligible(const GemmKernelSpec& spec);

// Emits the kernel (tensor cores when eligible) and records its launch.
void emit_gemm(LoweringContext& ctx, GemmKernelSpec spec);

// For a spec tensor_core_eligible accepts: whether A is stored m-contiguous (A^T) and B
// n-contiguous (dg_gemm_mainloop's AT and BKN).
struct TcTransposes {
  bool at, bkn;
};
TcTransposes tc_transposes(const GemmKernelSpec& spec);

// The K ranges a tensor-core main loop walks: spec.k_segments, or the spec's own operands as one.
std::vector<GemmKSegment> k_segments_or_whole(const GemmKernelSpec& spec);

// The mma.sync kernel of tile t for a tensor-core spec, under `launch` (its name, grid, variant,
// runs and flags set); `range` ends the summary's tile tag (", for M <= 512" or "").
void emit_mma_sync_kernel(LoweringContext& ctx, GemmKernelSpec& spec, KernelLaunch launch,
                          const TileConfig& t, const std::string& range);

// The GEMM's fallback kernel (Note [GEMM fallbacks] in kernel_plan.h): mma.sync with the default
// tile for every M, element stores, as variant `variant` of the GEMM whose first kernel is `base`.
// Emitted after every other kernel of the GEMM.
void emit_gemm_fallback(LoweringContext& ctx, GemmKernelSpec& spec, const std::string& base,
                        int variant);

// True when the sm_90a main loop can take a tensor-core spec (Note [sm_90a GEMMs] in
// emit_wgmma.cc): A K-major, every B K-major or every B N-major.
bool wgmma_eligible(const GemmKernelSpec& spec);
// The sm_90a kernels of such a GEMM: wgmma tiles by M, mma.sync for the smallest M, and the
// fallback (Note [GEMM fallbacks] in kernel_plan.h).
void emit_sm90_gemm(LoweringContext& ctx, GemmKernelSpec& spec);

// True when the split-K rank-r kernel can take the spec (Note [Rank-r products] in
// emit_rank_gemm.cc): f32 accumulation, static N and K >= 256 with all B columns (N times the B
// count) at most 64, no batch or K segments, 16-byte vectors along each operand's contiguous dim.
bool rank_gemm_eligible(const GemmKernelSpec& spec);
// Emits the split-K partial products and their in-order reduction with the epilogue, problem p on
// blockIdx.z == p; `params` holds every problem's epilogue buffers (as for emit_grouped_gemm).
void emit_rank_gemm(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                    KernelParams params);

// True when the problems lower to the same kernel shape (the same tile kind and size, the same
// operand layouts, M, N and K; no K segments, no batch), so one launch can run them all.
bool gemms_share_a_kernel(const std::vector<GemmKernelSpec>& problems);
// One kernel for all the problems, problem p on blockIdx.z == p (Note [Grouped GEMMs] in
// passes/group_independent_gemms.cc); `params` holds every problem's epilogue buffers (their own
// `params` are not read), A and B are added here. Needs gemms_share_a_kernel(problems).
void emit_grouped_gemm(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                       KernelParams params);

}  // namespace dg
