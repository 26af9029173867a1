// `dyngen compile FILE [--arch ARCH] [--cache-dir DIR] [--emit DIR] [--disable-pass NAME] [--json]`
#include <iostream>

#include "frontends/cli/commands.h"
#include "frontends/cli/compile_flags.h"
#include "runtime/compiler.h"
#include "runtime/cuda_driver.h"
#include "runtime/executable_json.h"

namespace dg {

namespace {
constexpr const char* kUsage =
    "compile FILE [--arch host|cuda|sm_80|sm_90a|...] [--cache-dir DIR] [--emit DIR] "
    "[--disable-pass NAME] [--json]";

const char* tier(CacheHit h) {
  return h == CacheHit::kDisk ? "hit (disk)" : h == CacheHit::kMemory ? "hit (memory)" : "miss";
}
}  // namespace

int run_compile_command(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err) {
  CompileFlags flags;
  if (!parse_compile_flags(args, kUsage, /*allow_bind=*/false, &flags, err))
    return kExitInvalidInput;
  if (flags.help) {
    out << "usage: dyngen " << kUsage << "\n"
        << "Compiles a graph (or finds it in the cache) and prints its kernels and cache key.\n"
           "Default arch: the GPU's, else sm_90a (compile only); `host` builds for CPU "
           "emulation.\n";
    return kExitOk;
  }
  auto graph = load_or_report(flags.file, err);
  if (!graph) return kExitInvalidInput;
  CompileRequest req = flags.request();
  if (req.target.empty()) req.target = CudaDriver::instance().available() ? "cuda" : "sm_90a";
  int64_t compiles_before = runtime_stats().nvrtc_compiles;
  int exit_code = kExitOk;
  auto compiled = compile_or_report(*graph, req, flags.file, err, &exit_code);
  if (!compiled) return exit_code;
  const CompileOutcome& o = *compiled;
  int64_t compiles = runtime_stats().nvrtc_compiles - compiles_before;
  const Executable& e = *o.executable;
  if (flags.json) {
    bool device = e.target() != "host";
    std::string j = describe_executable_json(e, o.key, static_cast<int>(o.cache_hit),
                                             device ? &o.resources : nullptr);
    j.insert(j.size() - 1, ", \"nvrtc_compiles\": " + std::to_string(compiles) +
                               ", \"file\": " + json_escape(flags.file));
    out << j << "\n";
    return kExitOk;
  }
  out << "graph:    " << flags.file << "\n"
      << "target:   " << e.target() << (e.runnable() ? "" : " (compile only: no such device here)")
      << "\n"
      << "key:      " << o.key << "\n"
      << "cache:    " << tier(o.cache_hit) << "\n"
      << "compiles: " << compiles << "\n"
      << "workspace bytes: " << e.plan().workspace_bytes.to_string() << "\n"
      << "kernels:  " << e.plan().kernels.size() << "\n";
  for (const KernelLaunch& k : e.plan().kernels) {
    out << "  " << k.name << "  grid [" << k.grid[0].to_string() << ", " << k.grid[1].to_string()
        << ", " << k.grid[2].to_string() << "] block [" << k.block[0] << "]  " << k.summary << "\n";
  }
  return kExitOk;
}

}  // namespace dg
