// Internal: what a GEMM kernel computes (GemmKernelSpec), as the fusion groups describe it to the
// GEMM emitters: the operands read in place, the epilogue run on the accumulators and the outputs
// it stores.
#pragma once
#include <string>
#include <vector>

#include "codegen/kernel_params.h"
#include "codegen/lowering.h"

namespace dg {

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

// An operand of the output's shape the epilogue reads at (row, col) through dg_in<k>(dg_st,
// address), k its position in GemmKernelSpec::operands (Note [Epilogue operand loads] in
// codegen/device/dg_epilogue_loads.cuh).
struct EpilogueOperand {
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
  // The epilogue's operands of the output's shape, in the order of their dg_in slots.
  std::vector<EpilogueOperand> operands;
  // Empty, or the K segments accumulated one after another into the same accumulators (then `a`
  // and `b` are the first segment's and K is their sum).
  std::vector<GemmKSegment> k_segments;
};

// The K ranges a tensor-core main loop walks: spec.k_segments, or the spec's own operands as one.
inline std::vector<GemmKSegment> k_segments_or_whole(const GemmKernelSpec& spec) {
  if (!spec.k_segments.empty()) return spec.k_segments;
  return {GemmKSegment{spec.a, spec.b, spec.K}};
}

}  // namespace dg
