// Internal to the codegen tests: a graph's host run against the reference evaluator when the
// kernels add in another order than the reference (Note [Rank-r products]: K split into chunks;
// weight gradients summed per token chunk; grad_x's terms in one accumulator). A reordered f32 sum
// moves a bf16 intermediate across a rounding boundary now and then, and the outputs computed
// from it by an ulp of that intermediate's scale, so the check is bf16 tolerance per element with
// the absolute part relative to the tensor's scale:
// |a - e| <= 1.6e-2 |e| + 1e-2 max(1, max |e|).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/executable.h"
#include "runtime/host_run.h"
#include "runtime/reference/reference_eval.h"

namespace dg {

inline void expect_matches_reference_reordered(const Graph& g, const Executable& exe,
                                               const std::vector<HostTensor>& inputs,
                                               const std::string& what,
                                               const HostRunOptions& options = {}) {
  auto actual = run_on_host(exe, inputs, options);
  ASSERT_TRUE(actual.ok()) << what << ": " << actual.message();
  RefResult expected = reference_eval(g, inputs);  // the unfused graph
  ASSERT_TRUE(expected.ok()) << expected.error;
  for (size_t j = 0; j < expected.outputs.size(); ++j) {
    const HostTensor& e = expected.outputs[j];
    double scale = 1.0;
    for (int64_t i = 0; i < e.numel(); ++i) scale = std::max(scale, std::fabs(e.get(i)));
    CompareResult c = compare(actual.value()[j], e, 1.6e-2, 1e-2 * scale);
    EXPECT_TRUE(c.ok) << what << " output " << j << " " << e.to_string() << ": " << c.message;
  }
}

}  // namespace dg
