#include "runtime/compiler.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <mutex>

#include "codegen/emit_cuda.h"
#include "ir/graph_hash.h"
#include "ir/sha256.h"
#include "ir/text_format.h"
#include "passes/pipeline.h"
#include "runtime/cache_key.h"
#include "runtime/cuda_driver.h"
#include "runtime/disk_cache.h"
#include "runtime/emu/device_headers.h"
#include "runtime/emu/emu_module.h"
#include "runtime/nvrtc_compiler.h"

namespace dg {

namespace {

std::atomic<int64_t> g_graphs{0}, g_compiles{0}, g_mem_hits{0}, g_disk_hits{0}, g_misses{0},
    g_corrupt{0}, g_launches{0}, g_unaligned_launches{0}, g_tma_fallbacks{0};

// One DiskCache per folder for the whole process (it also holds the memory tier of binaries).
DiskCache& cache_for(const std::string& dir) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<DiskCache>> caches;
  std::lock_guard<std::mutex> lock(mu);
  std::string resolved = dir.empty() ? default_cache_dir() : dir;
  auto& slot = caches[resolved];
  if (!slot) {
    DiskCacheOptions o;
    o.dir = resolved;
    slot = std::make_unique<DiskCache>(o);
  }
  return *slot;
}

// Compiled executables by (graph hash, target, options): a repeat compile in this process
// skips passes, codegen and the binary cache.
struct CachedExecutable {
  std::string key;
  std::shared_ptr<Executable> executable;
  std::vector<KernelResources> resources;
};
struct ExecutableCache {
  std::mutex mu;
  std::map<std::string, CachedExecutable> by_request;
};
ExecutableCache& executables() {
  static ExecutableCache* c = new ExecutableCache();
  return *c;
}

const std::string& host_compiler_identity() {
  static const std::string id = emu::EmuModule::compiler_identity() + " +source-sha";
  return id;
}

// A host module names the generated source it was built from (its sha256), so that a loaded
// module can be matched with the same source's PTX: what the driver double does (Note [How the
// double runs a kernel] in tests/driver_double/driver_double.cc), and a debugger can too.
std::string host_source(const std::string& source, const std::string& source_sha) {
  return source + "\nextern \"C\" __attribute__((visibility(\"default\"))) const char " +
         "dg_emu_source_sha256[] = \"" + source_sha + "\";\n";
}

std::string digest_of(std::initializer_list<const std::vector<EmbeddedFile>*> sets) {
  Sha256 h;
  for (const auto* files : sets)
    for (const EmbeddedFile& f : *files) {
      h.update(f.name);
      h.update(f.content);
    }
  auto d = h.finish();
  return to_hex(d.data(), d.size());
}

const std::string& device_headers_digest() {
  static const std::string digest = digest_of({&device_headers()});
  return digest;
}

// A host module is also built from the emulator's own headers (the engine, its scheduler and
// stack pool are compiled into every module): a change there is another module.
const std::string& host_headers_digest() {
  static const std::string digest = digest_of({&device_headers(), &emu::emu_headers()});
  return digest;
}

// Keeps only the symbols some value or attribute uses (a declared but unused symbol could
// never be bound at call time).
void drop_unused_symbols(Graph& g) {
  std::set<std::string> used;
  auto note = [&](const SymExpr& e) {
    for (const SymExpr& s : e.free_symbols()) used.insert(s.symbol_name());
  };
  for (const Value& v : g.values) {
    if (v.kind == ValueKind::kSymInt) note(v.sym_value);
    for (const SymExpr& d : v.type.shape) note(d);
  }
  for (const Node& n : g.nodes)
    for (auto& [k, a] : n.attrs.entries())
      if (auto* syms = std::get_if<std::vector<SymExpr>>(&a))
        for (const SymExpr& e : *syms) note(e);
  std::vector<SymExpr> kept;
  for (const SymExpr& s : g.symbols)
    if (used.count(s.symbol_name())) kept.push_back(s);
  g.symbols = kept;
}

struct ResolvedTarget {
  std::string name;  // "host" or an sm_XX arch
  bool runnable;     // a device here can run it
  int device = 0;    // the CUDA device it is loaded into at compile time
};

// The first device at or after `preferred` (wrapping) whose capability runs `arch`, or -1.
int device_for(const CudaDriver& driver, const std::string& arch, int preferred) {
  int n = driver.device_count();
  for (int k = 0; k < n; ++k) {
    int d = (preferred + k) % n;
    Result<int> cc = driver.compute_capability(d);
    if (cc.ok() && arch_runs_on(arch, cc.value())) return d;
  }
  return -1;
}

Result<ResolvedTarget> resolve_target(const std::string& requested) {
  CudaDriver& driver = CudaDriver::instance();
  if (requested == "host") return ResolvedTarget{"host", true};
  if (requested.empty()) {
    if (driver.available()) return ResolvedTarget{driver.default_arch(0), true};
    return ResolvedTarget{"host", true};
  }
  if (requested == "cuda" || requested.rfind("cuda:", 0) == 0) {
    int device = 0;
    if (requested.size() > 5) {
      std::string n = requested.substr(5);
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 6)
        return Status::error("target '" + requested + "': expected cuda:N with N a device number");
      device = std::stoi(n);
    }
    if (!driver.available())
      return Status::error("target " + requested + ": no usable GPU (" +
                           driver.unavailable_reason() + ")");
    if (device >= driver.device_count())
      return Status::error("target " + requested + ": there are " +
                           std::to_string(driver.device_count()) + " CUDA devices");
    return ResolvedTarget{driver.default_arch(device), true, device};
  }
  if (requested.rfind("sm_", 0) != 0)
    return Status::error("unknown target '" + requested +
                         "' (host, cuda, cuda:N, sm_80, sm_90a, ...)");
  // Note [Arch compatibility]: sm_90 code runs on an sm_90a device.
  int device = driver.available() ? device_for(driver, requested, 0) : -1;
  return ResolvedTarget{requested, device >= 0, device < 0 ? 0 : device};
}

// 1000*major + 10*minor of NVRTC ("nvrtc-13.0" -> 13000), 0 if it cannot be read.
int nvrtc_numeric_version() {
  static const int v = [] {
    std::string s = nvrtc_version();
    size_t dash = s.find('-'), dot = s.find('.');
    if (dash == std::string::npos || dot == std::string::npos) return 0;
    try {
      return std::stoi(s.substr(dash + 1, dot - dash - 1)) * 1000 +
             std::stoi(s.substr(dot + 1)) * 10;
    } catch (const std::exception&) {
      return 0;
    }
  }();
  return v;
}

// Note [PTX when the driver is older]
// A cubin from NVRTC X.Y needs a driver of at least X.Y; an older driver refuses it. Then the
// binary is PTX for the same arch ("compute_90a" for sm_90a), which the driver JIT-compiles, and
// the key says so, so that a newer driver on the same cache folder still gets its cubin.
std::string binary_arch(const ResolvedTarget& t) {
  const CudaDriver& driver = CudaDriver::instance();
  bool ptx = t.runnable && driver.available() && nvrtc_numeric_version() > 0 &&
             driver.driver_version() < nvrtc_numeric_version();
  return ptx ? "compute_" + t.name.substr(3) : t.name;
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

CompileOutcome failure(int status, std::string message) {
  CompileOutcome o;
  o.status = status;
  o.error = std::move(message);
  return o;
}

}  // namespace

const char* dyngen_version() { return "0.1.0"; }

CompileOptions device_compile_options(const std::string& arch) {
  CompileOptions copts;
  copts.arch = arch;
  // Line info names the source by its hash in the PTX and cubin (.file), which profilers show
  // and the driver double uses to find the source's host emulation.
  copts.line_info = true;
  copts.ptxas_verbose = true;  // Note [ptxas report]
  return copts;
}

Result<KernelKeyParts> kernel_key_parts(const std::string& source, const std::string& arch) {
  KernelKeyParts p;
  p.version = dyngen_version();
  p.arch = arch;
  if (arch == "host") {
    p.compiler = host_compiler_identity();
  } else {
    // The resolved NVRTC options are part of the key: a binary built with other options is
    // another binary (Note [What the key covers] in nvrtc_compiler.cc).
    auto resolved = nvrtc_options(device_compile_options(arch));
    if (!resolved.ok()) return Status::error(resolved.message());
    p.compiler = "nvrtc " + nvrtc_version();
    for (const std::string& opt : resolved.value()) p.compiler += " " + opt;
  }
  p.headers_digest = arch == "host" ? host_headers_digest() : device_headers_digest();
  p.source_digest = sha256_hex(source);
  return p;
}

std::string unknown_disabled_pass(const std::set<std::string>& names) {
  std::vector<std::string> known = pipeline_pass_names();
  for (const std::string& s : codegen_switch_names()) known.push_back(s);
  for (const std::string& p : names) {
    if (std::find(known.begin(), known.end(), p) != known.end()) continue;
    std::string list;
    for (const std::string& n : known) list += (list.empty() ? "" : ", ") + n;
    return "disabled pass '" + p + "': no such pass (passes: " + list + ")";
  }
  return "";
}

CompileOutcome compile_graph(const Graph& input, const CompileRequest& request) {
  auto target = resolve_target(request.target);
  if (!target.ok()) return failure(DG_ERR_INVALID_INPUT, target.message());
  std::string bad_pass = unknown_disabled_pass(request.disabled_passes);
  if (!bad_pass.empty()) return failure(DG_ERR_INVALID_INPUT, bad_pass);

  const std::string source_arch = request.source_arch.empty() ? target->name : request.source_arch;
  if (source_arch != "host" && source_arch.rfind("sm_", 0) != 0)
    return failure(DG_ERR_INVALID_INPUT, "source arch '" + source_arch + "': expected sm_XX");
  std::string options_tag =
      target->name + "|" + source_arch + "|" + std::to_string(request.wave_ctas) + "|";
  for (const std::string& p : request.disabled_passes) options_tag += p + ",";
  std::string request_key = graph_hash(input) + "|" + options_tag;
  if (request.emit_dir.empty()) {
    std::lock_guard<std::mutex> lock(executables().mu);
    auto it = executables().by_request.find(request_key);
    if (it != executables().by_request.end()) {
      ++g_graphs;  // dg_stats.graphs_compiled counts cache hits too (dyngen.h)
      ++g_mem_hits;
      CompileOutcome o;
      o.key = it->second.key;
      o.executable = it->second.executable;
      o.resources = it->second.resources;
      o.cache_hit = CacheHit::kMemory;
      return o;
    }
  }

  // Passes and codegen run on the canonical form, so the source (and the key) does not depend on
  // Dynamo's symbol names.
  std::filesystem::path emit(request.emit_dir);
  if (!request.emit_dir.empty()) std::filesystem::create_directories(emit);
  PipelineOptions popts;
  popts.disabled = request.disabled_passes;
  int pass_index = 0;
  if (!request.emit_dir.empty())
    popts.after_pass = [&](const std::string& name, const Graph& g) {
      write_file(emit / (std::to_string(pass_index++) + "_" + name + ".dgir"), print_graph(g));
    };
  Graph optimized;
  KernelPlan plan;
  try {
    optimized = run_pipeline(canonicalize_symbols(input), popts);
    drop_unused_symbols(optimized);
    CodegenOptions copts = codegen_options_for(source_arch, request.disabled_passes);
    copts.wave_ctas = request.wave_ctas;
    plan = emit_cuda(optimized, copts);
  } catch (const UnsupportedError& e) {
    return failure(DG_ERR_UNSUPPORTED, e.what());
  } catch (const std::exception& e) {
    return failure(DG_ERR_INTERNAL, std::string("codegen: ") + e.what());
  }
  if (!request.emit_dir.empty()) write_file(emit / "kernels.cu", plan.source);

  bool host = target->name == "host";
  std::string arch = host ? "host" : binary_arch(target.value());
  // Note [Kernel cache key]: `stored_key` is what the entry holds, `key` its file stem.
  auto key_parts = kernel_key_parts(plan.source, arch);
  if (!key_parts.ok()) return failure(DG_ERR_INVALID_INPUT, key_parts.message());
  const std::string source_sha = key_parts->source_digest;
  const std::string stored_key = kernel_cache_key(key_parts.value());
  const std::string key = sha256_hex(stored_key);
  // Note [ptxas report]
  // Every device compile asks ptxas for its per-kernel report (-Xptxas=-v); the parsed report
  // travels with the binary in its cache entry (Note [Device cache payload] in ptxas_report.h).
  std::vector<KernelResources> resources;

  DiskCache& cache = cache_for(request.cache_dir);
  CacheCounters before = cache.counters();
  std::optional<std::string> binary = cache.get(stored_key);
  CacheCounters after = cache.counters();
  g_corrupt += static_cast<int64_t>(after.corrupt_entries - before.corrupt_entries);
  CacheHit hit = CacheHit::kMiss;
  if (binary) {
    hit = after.disk_hits > before.disk_hits ? CacheHit::kDisk : CacheHit::kMemory;
    std::string unpacked;
    if (host) {
      // Host entries hold the shared object itself.
    } else if (unpack_device_payload(*binary, &unpacked, &resources)) {
      binary = std::move(unpacked);
    } else {
      // Written by an older dyngen or damaged past its checksum: compile again.
      ++g_corrupt;
      cache.invalidate(stored_key);
      binary.reset();
    }
  }

  std::unique_ptr<KernelModule> module;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!binary) {
      hit = CacheHit::kMiss;
      ++g_compiles;
      if (host) {
        auto so = emu::EmuModule::compile_to_shared_object(host_source(plan.source, source_sha));
        if (!so.ok()) return failure(DG_ERR_COMPILE, "host compiler failed:\n" + so.message());
        binary = so.value();
      } else {
        std::vector<CudaHeader> headers;
        for (const EmbeddedFile& f : device_headers())
          headers.push_back({std::string(f.name), std::string(f.content)});
        auto compiled = nvrtc_compile(plan.source, headers, device_compile_options(arch),
                                      "dyngen_" + source_sha + ".cu");
        if (!compiled.ok()) return failure(DG_ERR_COMPILE, compiled.message());
        binary = compiled->binary;
        resources = parse_ptxas_log(compiled->log);
      }
      // A failed write has already degraded the cache to memory and warned.
      (void)cache.put(stored_key, host ? *binary : pack_device_payload(*binary, resources));
    }
    if (!target->runnable) break;
    int code = 0;
    auto loaded =
        host ? load_host_module(*binary) : load_cuda_module(*binary, target->device, &code);
    if (loaded.ok()) {
      module = std::move(loaded).value();
      break;
    }
    // Note [Failed module load is a miss]: only an image the driver refuses is dropped and
    // compiled again, once; any other failure (a sticky fault, no memory) leaves the entry.
    bool rejected = host || image_rejected(code);
    if (!rejected || attempt == 1)
      return failure(DG_ERR_INTERNAL, "cannot load kernels: " + loaded.message());
    cache.invalidate(stored_key);
    binary.reset();
  }
  if (hit == CacheHit::kMemory) ++g_mem_hits;
  if (hit == CacheHit::kDisk) ++g_disk_hits;
  if (hit == CacheHit::kMiss) ++g_misses;

  auto exe =
      Executable::create(std::move(optimized), std::move(plan), std::move(module), target->name);
  if (!exe.ok()) return failure(DG_ERR_UNSUPPORTED, exe.message());
  ++g_graphs;
  CompileOutcome o;
  o.executable = exe.value();
  o.key = key;
  o.cache_hit = hit;
  o.resources = resources;
  {
    std::lock_guard<std::mutex> lock(executables().mu);
    executables().by_request[request_key] = {key, o.executable, resources};
  }
  return o;
}

RuntimeStats runtime_stats() {
  return {g_graphs.load(),       g_compiles.load(), g_mem_hits.load(), g_disk_hits.load(),
          g_misses.load(),       g_corrupt.load(),  g_launches.load(), g_unaligned_launches.load(),
          g_tma_fallbacks.load()};
}

void reset_runtime_stats() {
  g_graphs = g_compiles = g_mem_hits = g_disk_hits = g_misses = g_corrupt = g_launches = 0;
  g_unaligned_launches = g_tma_fallbacks = 0;
}

void count_launch() { ++g_launches; }
void count_unaligned_launch() { ++g_unaligned_launches; }
void count_tma_fallback() { ++g_tma_fallbacks; }

}  // namespace dg
