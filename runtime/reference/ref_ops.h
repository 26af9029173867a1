// Internal to the reference evaluator: what every op implementation receives, the per-category
// entry points, and the index helpers they share.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/reference/host_tensor.h"

namespace dg::ref {

using SymEnv = std::map<std::string, int64_t>;

// One node's evaluation. `out` arrives with its dtype and evaluated shape and zeroed bytes.
struct OpArgs {
  const Graph& graph;
  const Node& node;
  std::vector<const HostTensor*> in;
  const SymEnv& env;
  HostTensor* out;
};

// Each returns an error message, or "" on success. One per op category (ops.def).
std::string eval_create(const OpArgs& a);       // constant, full
std::string eval_cast(const OpArgs& a);         // cast
std::string eval_elementwise(const OpArgs& a);  // unary, binary, compare, where
std::string eval_matmul(const OpArgs& a);       // linear, matmul
std::string eval_reduce(const OpArgs& a);       // sum, mean, amax, cumsum, topk
std::string eval_layout(const OpArgs& a);       // reshape, permute, expand, slice, cat
std::string eval_index(const OpArgs& a);        // index_select, index_add
std::string eval_grouped(const OpArgs& a);      // expert_offsets/order, grouped_mm(_wgrad)

// Which C++ type an op computes in for a result of `dtype` (Note [Reference semantics]).
enum class Compute { kFloat, kDouble, kInt };
Compute compute_of(DType dtype);

// Evaluates symbolic expressions under `env`; false (with *error set) if one cannot be evaluated.
bool eval_syms(const std::vector<SymExpr>& exprs, const SymEnv& env, std::vector<int64_t>* out,
               std::string* error);

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
// Strides that read a tensor of `in_shape` broadcast (numpy rules) to `out_shape`; false when the
// shapes do not broadcast.
bool broadcast_strides(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape,
                       std::vector<int64_t>* strides);
// Normalizes a possibly negative axis; -1 when out of range.
int64_t norm_axis(int64_t axis, int64_t rank);

// Calls f(linear_index, offsets) for every element of `shape` in row-major order, where
// offsets[k] = sum_d index[d] * strides[k][d] (plus bases[k]) for each operand k.
template <class F>
void for_each_index(const std::vector<int64_t>& shape,
                    const std::vector<std::vector<int64_t>>& strides,
                    const std::vector<int64_t>& bases, F f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n == 0) return;
  const size_t rank = shape.size(), k = strides.size();
  std::vector<int64_t> idx(rank, 0), off(bases);
  off.resize(k, 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, off.data());
    for (size_t d = rank; d-- > 0;) {  // odometer step
      if (++idx[d] < shape[d]) {
        for (size_t j = 0; j < k; ++j) off[j] += strides[j][d];
        break;
      }
      for (size_t j = 0; j < k; ++j) off[j] -= strides[j][d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Every element of `t`, in row-major order, converted to the compute type T.
template <class T>
std::vector<T> to_compute(const HostTensor& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = load_element<T>(t, static_cast<int64_t>(i));
  return v;
}

}  // namespace dg::ref
