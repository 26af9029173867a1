// The compile path: passes -> codegen -> cache lookup -> NVRTC or the host compiler -> load.
#pragma once
#include <memory>
#include <set>
#include <string>

#include "ir/graph.h"
#include "runtime/cache_key.h"
#include "runtime/executable.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/ptxas_report.h"

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

CompileOutcome compile_graph(const Graph& g, const CompileRequest& request);

// "" when every name is a pipeline pass or a codegen switch; else a message naming the first that
// is neither, with the known names. compile_graph refuses a request that fails it, so a misspelt
// --disable-pass or DYNGEN_DISABLE_PASSES is an error, not a build that silently ignores it.
std::string unknown_disabled_pass(const std::set<std::string>& names);

// Process-wide counters behind dg_get_stats.
struct RuntimeStats {
  int64_t graphs_compiled = 0, nvrtc_compiles = 0, cache_hits_memory = 0, cache_hits_disk = 0,
          cache_misses = 0, cache_corrupt = 0, launches = 0, unaligned_launches = 0,
          tma_fallback_launches = 0;
};
RuntimeStats runtime_stats();
void reset_runtime_stats();
void count_launch();
// A kernel launch that takes the slow path for an unaligned operand (Note [Unaligned operands]).
void count_unaligned_launch();
// A GEMM whose tensor maps did not encode, so its mma.sync kernels ran (Note [Tensor maps]).
void count_tma_fallback();

// The dyngen version that enters every cache key.
const char* dyngen_version();

// The NVRTC options of every device compile for `arch` (they enter the key).
CompileOptions device_compile_options(const std::string& arch);

// The key parts (Note [Kernel cache key]) the compile path uses for CUDA `source` on `arch`;
// an error for an arch NVRTC's options cannot name.
Result<KernelKeyParts> kernel_key_parts(const std::string& source, const std::string& arch);

}  // namespace dg
