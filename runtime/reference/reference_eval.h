// The reference evaluator: runs an IR graph on the host, op by op, with PyTorch eager's numerics.
// It shares nothing with codegen (no lowering, no fusion), so kernels can be checked against it.
//
// Note [Binding inputs]
// inputs[i] is the host value of g.inputs[i]. A tensor input must have the declared dtype and
// rank, and bytes.size() == numel * dtype size. A symbolic-integer input (Value.kind == kSymInt)
// is passed as a rank-0 i64 HostTensor holding the integer (make_sym_int). Symbols bind from
// every dim (and symbolic-integer input) whose expression is a bare symbol; a second sighting
// must agree. Every bound symbol must satisfy its declared facts (range and divisor): the IR may
// have been simplified using them. Then every other dim expression is evaluated and checked.
// Any mismatch is an error result naming the input and dim, never a crash.
//
// Note [Reference semantics]
// Each op computes in one compute type and rounds its result to the output dtype once:
//   float for bf16/f16/f32, double for f64, int64 for integer and bool results (wrapping).
//   Elementwise ops (unary, binary, where) take the compute type of the output dtype the graph
//   gives; a compare takes that of its operands' promotion (promote_types). Operands convert
//   straight to the compute type (Note [Element conversions]), so a rank-0 f32 operand of a bf16
//   op is used at f32 precision, as PyTorch's scalar paths do.
//   Broadcasting follows numpy rules. maximum/minimum/relu propagate NaN. gelu is the erf form;
//   silu_backward(g, x) = g * s * (1 + x * (1 - s)) with s = sigmoid(x);
//   sigmoid_backward(g, y) = g * (1 - y) * y.
//   cast / where / constant / full convert with Note [Element conversions].
//   linear(x, w[, b]) = x @ w^T (+ b) and matmul accumulate over K in order in the compute type,
//   add the bias in it, and round once.
//   sum/mean (dims may be negative; keepdim; optional dtype, which the input is converted to
//   first, as torch.sum(x, dtype=...) does) accumulate pairwise in the compute type; mean divides
//   the sum by the count before rounding. amax propagates NaN; an empty amax is an error. An empty
//   `dims` list reduces nothing (the IR's typing), unlike torch.sum(x, dim=[]).
//   index_select / index_add: a negative index wraps once (i + size); anything still outside
//   [0, size) is an error result. index_add computes x + alpha * src in the compute type, with all
//   contributions to one element summed before its single rounding.
// Known differences from CPU eager (torch 2.11, checked op by op on random inputs): a rank-0
// operand of another dtype (CPU eager first rounds it to the common dtype for add/sub/compare and
// others; here it is used as CUDA's scalar path uses it, at its own precision); f16
// sigmoid_backward (CPU eager computes it in f16); index_add with repeated indices (eager rounds
// after each add, on CUDA in nondeterministic order; here once, by design); negative indices
// (eager raises). Otherwise bf16/f16 results match bit for bit, except gelu and f16 GEMMs (1 ulp
// in a few elements); f32 results differ by ulps (libm vs SLEEF, summation order).
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/reference/host_tensor.h"

namespace dg {

struct RefResult {
  std::vector<HostTensor> outputs;  // one per g.outputs, in order; empty on error
  std::string error;                // empty on success
  bool ok() const { return error.empty(); }
};

// Evaluates `g` on `inputs` (Note [Binding inputs], Note [Reference semantics]). The graph is
// verified first; a malformed graph, a bad input or a bad index gives an error, never a crash.
RefResult reference_eval(const Graph& g, const std::vector<HostTensor>& inputs);

}  // namespace dg
