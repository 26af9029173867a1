// The compile path: passes -> codegen -> cache lookup -> NVRTC or the host compiler -> load.
#pragma once
#include <memory>
#include <set>
#include <string>

#include "ir/graph.h"
#include "runtime/binary_key.h"
#include "runtime/executable.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/ptxas_report.h"
#include "runtime/runtime_stats.h"  // the counters compile_graph keeps, for its callers

namespace dg {

struct CompileRequest {
  // "host" (CPU emulation), "cuda" (the GPU here), an arch such as "sm_80"/"sm_90a", or ""
  // (cuda if a GPU is present, else host). An arch with no matching GPU compiles but cannot run.
  std::string target;
  std::string cache_dir;  // "": DYNGEN_CACHE_DIR or the user's cache folder
  std::string emit_dir;   // "": none; else the CUDA source and the IR after each pass go there
  std::set<std::string> disabled_passes;  // pipeline passes and codegen_switch_names()
  // The arch the source is generated for, when not the target's: "sm_90a" with target "host"
  // runs the sm_90a kernels (wgmma, TMA) under the host emulation.
  std::string source_arch;
  int64_t wave_ctas = 0;  // CodegenOptions::wave_ctas (tests)
};

enum class CacheHit { kMiss = 0, kMemory = 1, kDisk = 2 };

struct CompileOutcome {
  std::shared_ptr<Executable> executable;
  std::string key;
  CacheHit cache_hit = CacheHit::kMiss;
  int status = 0;  // a dg_status code
  std::string error;
  // Device targets: ptxas's report for each kernel (Note [ptxas report] in compiler.cc); empty
  // for host, and for a binary cached without one.
  std::vector<KernelResources> resources;
  bool ok() const { return status == 0; }
};

// The compile path for `g` (its steps, in order, are the body of compile_graph in compiler.cc); a
// repeat of a request in this process returns the same executable.
CompileOutcome compile_graph(const Graph& g, const CompileRequest& request);

// "" when every name is a pipeline pass or a codegen switch; else a message naming the first that
// is neither, with the known names. compile_graph refuses a request that fails it, so a misspelt
// --disable-pass or DYNGEN_DISABLE_PASSES is an error, not a build that silently ignores it.
std::string unknown_disabled_pass(const std::set<std::string>& names);

}  // namespace dg
