// Helpers shared by the reference evaluator's tests.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/reference/reference_eval.h"

namespace dg::testing {

using Dims = std::vector<int64_t>;
using Vals = std::vector<double>;

inline HostTensor T(DType dtype, Dims shape, Vals values) {
  return make_tensor(dtype, std::move(shape), values);
}

// Runs `g` and returns its outputs; records a test failure (and returns nothing) on an error.
inline std::vector<HostTensor> run(const Graph& g, const std::vector<HostTensor>& inputs) {
  RefResult r = reference_eval(g, inputs);
  EXPECT_TRUE(r.ok()) << r.error;
  return r.outputs;
}

// The single output of `g`, or an empty f32 tensor after recording a failure.
inline HostTensor run1(const Graph& g, const std::vector<HostTensor>& inputs) {
  std::vector<HostTensor> outs = run(g, inputs);
  if (outs.size() != 1) return HostTensor{};
  return outs[0];
}

// The error `g` gives on `inputs`; records a failure if it succeeds.
inline std::string run_error(const Graph& g, const std::vector<HostTensor>& inputs) {
  RefResult r = reference_eval(g, inputs);
  EXPECT_FALSE(r.ok()) << "expected an error";
  EXPECT_TRUE(r.outputs.empty());
  return r.error;
}

inline Vals values(const HostTensor& t) {
  Vals v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get(i));
  return v;
}

// `v` as a tensor of `dtype` would hold it (computed through double -> float -> dtype).
inline double as(DType dtype, double v) { return round_to_dtype<double>(dtype, v); }

// Expects `actual` to have `dtype`, `shape` and `want` within a relative/absolute tolerance
// (0 = exact; NaN matches NaN).
inline void expect_tensor(const HostTensor& actual, DType dtype, const Dims& shape,
                          const Vals& want, double rtol = 0, double atol = 0) {
  ASSERT_EQ(dtype_name(actual.dtype), dtype_name(dtype));
  ASSERT_EQ(actual.shape, shape);
  HostTensor expected = make_tensor(dtype_is_float(dtype) ? DType::kF64 : DType::kI64, shape);
  ASSERT_EQ(static_cast<int64_t>(want.size()), expected.numel());
  for (size_t i = 0; i < want.size(); ++i) expected.set(static_cast<int64_t>(i), want[i]);
  CompareResult c = compare(actual, expected, rtol, atol);
  EXPECT_TRUE(c.ok) << c.message;
}

}  // namespace dg::testing
