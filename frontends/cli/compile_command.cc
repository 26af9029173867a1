// `dyngen compile FILE... [--arch ARCH]... [--cache-dir DIR] [--emit DIR] [--disable-pass NAME]
// [--fallbacks] [--json]`. One FILE and one arch print that graph's kernels; several (or a folder
// of graph.fb files, e.g. a DYNGEN_DUMP folder) compile every graph for every arch and print a
// summary: the way a CPU machine prebuilds a GPU fleet's kernel cache (Note [Kernel cache key]).
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "frontends/cli/commands.h"
#include "frontends/cli/compile_flags.h"
#include "runtime/compiler.h"
#include "runtime/cuda_driver.h"
#include "runtime/executable_json.h"

namespace dg {

namespace {
constexpr const char* kUsage =
    "compile FILE|FOLDER... [--arch host|cuda|sm_80|sm_90a|...]... [--cache-dir DIR] "
    "[--emit DIR] [--disable-pass NAME] [--fallbacks] [--json]";

const char* tier(CacheHit h) {
  return h == CacheHit::kDisk ? "hit (disk)" : h == CacheHit::kMemory ? "hit (memory)" : "miss";
}

// FILE arguments with each folder replaced by the *.fb files in it (sorted); false (and one line
// on stderr) for a folder without any.
bool expand_files(const std::vector<std::string>& args, std::vector<std::string>* files,
                  std::ostream& err) {
  for (const std::string& a : args) {
    std::error_code ec;
    if (!std::filesystem::is_directory(a, ec)) {
      files->push_back(a);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::directory_iterator(a, ec))
      if (e.path().extension() == ".fb" && e.is_regular_file(ec)) found.push_back(e.path());
    if (found.empty()) {
      err << "dyngen: " << a << ": a folder without graph.fb files (*.fb)\n";
      return false;
    }
    std::sort(found.begin(), found.end());
    files->insert(files->end(), found.begin(), found.end());
  }
  return true;
}

// The executable's description with the compile's NVRTC count and the graph's file.
Json compile_json(const std::string& file, const CompileOutcome& o, int64_t compiles,
                  const std::vector<KernelResources>* resources) {
  Json j = describe_executable_json(*o.executable, o.key, static_cast<int>(o.cache_hit), resources);
  j["nvrtc_compiles"] = compiles;
  j["file"] = file;
  return j;
}

// One FILE, one arch: the graph's kernels and key.
void print_one(const std::string& file, const CompileOutcome& o, int64_t compiles, bool json,
               std::ostream& out) {
  const Executable& e = *o.executable;
  if (json) {
    bool device = e.target() != "host";
    out << json_text(compile_json(file, o, compiles, device ? &o.resources : nullptr)) << "\n";
    return;
  }
  out << "graph:    " << file << "\n"
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
}

struct Summary {
  int64_t graphs = 0, kernels = 0, compiled = 0, cached = 0, failed = 0;
};

}  // namespace

int run_compile_command(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err) {
  // --fallbacks is ours; the rest are the flags compile, plan and run share.
  std::vector<std::string> rest;
  bool fallbacks = false;
  for (const std::string& a : args) {
    if (a == "--fallbacks")
      fallbacks = true;
    else
      rest.push_back(a);
  }
  CompileFlags flags;
  if (!parse_compile_flags(rest, kUsage, /*allow_bind=*/false, &flags, err, /*allow_many=*/true))
    return kExitInvalidInput;
  if (flags.help) {
    out << "usage: dyngen " << kUsage << "\n"
        << "Compiles graphs (or finds them in the cache) and prints their kernels and cache keys.\n"
           "Default arch: the GPU's, else sm_90a (compile only); `host` builds for CPU "
           "emulation.\n"
           "Several files, a folder of *.fb files (a DYNGEN_DUMP folder) or several --arch values\n"
           "compile every graph for every arch and print a summary line (graphs, kernels,\n"
           "compiled, already cached): prebuilding a kernel cache for the GPUs that will run "
           "them.\n"
           "--fallbacks also compiles the GEMMs' fallback kernels, which a process otherwise\n"
           "compiles the first time a call needs one (a view with a storage offset).\n";
    return kExitOk;
  }
  std::vector<std::string> files;
  if (!expand_files(flags.files, &files, err)) return kExitInvalidInput;
  std::vector<std::string> archs = flags.archs;
  if (archs.empty()) archs.push_back(CudaDriver::instance().available() ? "cuda" : "sm_90a");
  const bool batch = files.size() > 1 || archs.size() > 1;

  Summary sum;
  int exit_code = kExitOk;
  Json results = Json::array();  // --json: one object per (file, arch)
  for (const std::string& file : files) {
    auto graph = load_or_report(file, err);
    if (!graph) {
      ++sum.failed;
      if (exit_code == kExitOk) exit_code = kExitInvalidInput;
      continue;
    }
    ++sum.graphs;
    for (const std::string& arch : archs) {
      CompileRequest req = flags.request();
      req.target = arch;
      const int64_t compiles_before = runtime_stats().nvrtc_compiles;
      int code = kExitOk;
      auto compiled = compile_or_report(*graph, req, file, err, &code);
      if (compiled && fallbacks) {
        // Note [Fallbacks compiled on first need]: now, into the same cache.
        Status built = compiled->executable->build_fallbacks();
        if (!built.ok()) {
          err << "dyngen: " << file << ": " << built.message() << "\n";
          compiled.reset();
          code = kExitInternalError;
        }
      }
      if (!compiled) {
        ++sum.failed;
        if (exit_code == kExitOk) exit_code = code;
        continue;
      }
      const int64_t compiles = runtime_stats().nvrtc_compiles - compiles_before;
      if (!batch) {
        print_one(file, *compiled, compiles, flags.json, out);
        return kExitOk;
      }
      const Executable& e = *compiled->executable;
      sum.kernels += static_cast<int64_t>(e.plan().kernels.size());
      (compiled->cache_hit == CacheHit::kMiss ? sum.compiled : sum.cached) += 1;
      if (flags.json) {
        results.push_back(compile_json(file, *compiled, compiles, nullptr));
      } else {
        out << file << "  " << e.target() << "  " << tier(compiled->cache_hit) << "  "
            << e.plan().kernels.size() << " kernels  key " << compiled->key.substr(0, 16) << "\n";
      }
    }
  }
  if (!batch) return exit_code;
  if (flags.json) {
    Json summary = {{"graphs", sum.graphs},         {"archs", archs.size()},
                    {"kernels", sum.kernels},       {"compiled", sum.compiled},
                    {"already_cached", sum.cached}, {"failed", sum.failed}};
    out << json_text({{"results", std::move(results)}, {"summary", std::move(summary)}}) << "\n";
  } else {
    out << "summary: " << sum.graphs << " graphs x " << archs.size()
        << " archs = " << sum.compiled + sum.cached << " binaries (" << sum.kernels
        << " kernels): compiled " << sum.compiled << ", already cached " << sum.cached
        << ", failed " << sum.failed << "\n";
  }
  return exit_code;
}

}  // namespace dg
