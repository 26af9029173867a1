// Numerics checks of compiled graphs under the host emulation: a graph's text compiled, one call
// on random inputs against the reference evaluator, and "compile once, check every token count"
// (the compile must serve every size; Note [Tolerance at the tensor's scale] in
// runtime/host_run.h says how outputs are compared).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/compiler.h"
#include "runtime/executable.h"
#include "runtime/host_run.h"

namespace dg::testing {

// A graph and its executable (null when the compile failed, which fails the test).
struct CompiledGraph {
  Graph graph;
  std::shared_ptr<Executable> exe;
};
// `g` compiled for the host emulation into the run's shared test cache (null when the compile
// failed, which fails the test).
std::shared_ptr<Executable> compile_for_host(const Graph& g);

// The graph written in `text`, compiled with `req`.
CompiledGraph compile_text(const std::string& text, const CompileRequest& req);

// Runs `exe` (compiled from `g`) once on random inputs drawn with `seed`, `symbol` bound to
// `value`, and expects every output to match the reference evaluator on `g`. A failure names
// "symbol=value".
void expect_matches_reference_at(const Graph& g, const Executable& exe, const std::string& symbol,
                                 int64_t value, uint64_t seed,
                                 ToleranceMode mode = ToleranceMode::kElementwise,
                                 const HostRunOptions& where = {});

// Expects each of `actual` within `fraction` of the matching `expected` tensor's scale (its largest
// magnitude, at least 1), relative and absolute: accuracy bars tighter or looser than a dtype's
// default, stated by the test. A failure names `where` and the output.
void expect_within_scale(const std::vector<HostTensor>& actual,
                         const std::vector<HostTensor>& expected, double fraction,
                         const std::string& where = "");

// How many NVRTC compiles a sweep may make: one into a fresh cache folder, at most one into a
// folder that other cases of the run fill too.
enum class SweepCompiles { kExactlyOne, kAtMostOne };

// Compiles `g` once for the host emulation into `cache_dir`, then checks it at the tensor's scale
// at each of `token_counts` (inputs seeded with 100 + the count); stops at the first call that
// cannot run.
void check_every_token_count(const Graph& g, const std::string& symbol,
                             const std::vector<int64_t>& token_counts, const std::string& cache_dir,
                             SweepCompiles compiles);

}  // namespace dg::testing
