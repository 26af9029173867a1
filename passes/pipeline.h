// The pass pipeline: one list, in order (see pipeline.cc for why each pass sits where it does).
#pragma once
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dg {

struct PipelineOptions {
  std::set<std::string> disabled;  // pass names to skip, for bisecting
  bool verify_each = true;         // run the verifier after every pass
  // Called after each pass that ran, with its name and result (for DYNGEN_DUMP / --emit).
  std::function<void(const std::string& pass, const Graph&)> after_pass;
};

// Names of the passes in pipeline order.
std::vector<std::string> pipeline_pass_names();
// Runs one pass of the pipeline by name; throws std::invalid_argument for an unknown name.
Graph run_pass(const std::string& name, const Graph& g);
// Runs the pipeline; throws std::logic_error naming the pass if its result fails to verify.
Graph run_pipeline(const Graph& g, const PipelineOptions& options = {});

}  // namespace dg
