#include "runtime/compiler.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include "codegen/emit_cuda.h"
#include "ir/graph_hash.h"
#include "ir/text_format.h"
#include "passes/pipeline.h"
#include "runtime/binary_key.h"
#include "runtime/cache_key.h"
#include "runtime/cuda_driver.h"
#include "runtime/disk_cache.h"
#include "runtime/emu/device_headers.h"
#include "runtime/emu/emu_module.h"
#include "runtime/nvrtc_compiler.h"

namespace dg {

namespace {

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

// A host module names the generated source it was built from (its sha256), so that a loaded
// module can be matched with the same source's PTX: what the driver double does (Note [How the
// double runs a kernel] in tests/driver_double/driver_double.cc), and a debugger can too.
std::string host_source(const std::string& source, const std::string& source_sha) {
  return source + "\nextern \"C\" __attribute__((visibility(\"default\"))) const char " +
         "dg_emu_source_sha256[] = \"" + source_sha + "\";\n";
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

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

CompileOutcome failure(int status, std::string message) {
  CompileOutcome o;
  o.status = status;
  o.error = std::move(message);
  return o;
}

// ---- The steps of compile_graph, in the order it takes them ----

// A step's product, or the failure (a dg_status code and its message) that ends the compile.
template <typename T>
class Step {
 public:
  Step(T value) : value_(std::move(value)) {}
  Step(CompileOutcome failed) : failed_(std::move(failed)) {}
  bool ok() const { return value_.has_value(); }
  const CompileOutcome& failure() const { return failed_; }
  T& operator*() { return *value_; }
  T* operator->() { return &*value_; }

 private:
  std::optional<T> value_;
  CompileOutcome failed_;
};

// A request checked and resolved: what to build, for what.
struct CompileJob {
  ResolvedTarget target;
  std::string source_arch;  // the arch the source is generated for (the target's, or the request's)
  std::string options_tag;  // everything besides the graph that selects an executable
};

Step<CompileJob> check_request(const CompileRequest& request) {
  auto target = resolve_target(request.target);
  if (!target.ok()) return failure(DG_ERR_INVALID_INPUT, target.message());
  std::string bad_pass = unknown_disabled_pass(request.disabled_passes);
  if (!bad_pass.empty()) return failure(DG_ERR_INVALID_INPUT, bad_pass);
  CompileJob job{target.value(), request.source_arch.empty() ? target->name : request.source_arch,
                 ""};
  if (job.source_arch != "host" && job.source_arch.rfind("sm_", 0) != 0)
    return failure(DG_ERR_INVALID_INPUT, "source arch '" + job.source_arch + "': expected sm_XX");
  job.options_tag =
      target->name + "|" + job.source_arch + "|" + std::to_string(request.wave_ctas) + "|";
  for (const std::string& p : request.disabled_passes) job.options_tag += p + ",";
  if (device_debug_mode()) job.options_tag += "|device-debug";  // another binary
  return job;
}

// A repeat of a compile this process made: its executable, without passes, codegen or the binary
// cache. A compile that emits files always runs.
std::optional<CompileOutcome> find_compiled(const std::string& request_key,
                                            const CompileRequest& request) {
  if (!request.emit_dir.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(executables().mu);
  auto it = executables().by_request.find(request_key);
  if (it == executables().by_request.end()) return std::nullopt;
  count_stat(Stat::graphs_compiled);  // it counts cache hits too (runtime/dyngen_stats.def)
  count_stat(Stat::cache_hits_memory);
  CompileOutcome o;
  o.key = it->second.key;
  o.executable = it->second.executable;
  o.resources = it->second.resources;
  o.cache_hit = CacheHit::kMemory;
  return o;
}

struct GeneratedKernels {
  Graph optimized;
  KernelPlan plan;
};

// The pass pipeline and codegen; with an emit folder, the IR after each pass and the CUDA source
// are written there.
Step<GeneratedKernels> generate_kernels(const Graph& canonical, const CompileJob& job,
                                        const CompileRequest& request) {
  std::filesystem::path emit(request.emit_dir);
  if (!request.emit_dir.empty()) std::filesystem::create_directories(emit);
  PipelineOptions popts;
  popts.disabled = request.disabled_passes;
  int pass_index = 0;
  if (!request.emit_dir.empty())
    popts.after_pass = [&](const std::string& name, const Graph& g) {
      write_file(emit / (std::to_string(pass_index++) + "_" + name + ".dgir"), print_graph(g));
    };
  GeneratedKernels out;
  try {
    out.optimized = run_pipeline(canonical, popts);
    drop_unused_symbols(out.optimized);
    CodegenOptions copts = codegen_options_for(job.source_arch, request.disabled_passes);
    copts.wave_ctas = request.wave_ctas;
    out.plan = emit_cuda(out.optimized, copts);
  } catch (const UnsupportedError& e) {
    return failure(DG_ERR_UNSUPPORTED, e.what());
  } catch (const std::exception& e) {
    return failure(DG_ERR_INTERNAL, std::string("codegen: ") + e.what());
  }
  if (!request.emit_dir.empty()) {
    write_file(emit / "kernels.cu", out.plan.source);
    if (!out.plan.fallback_source.empty())
      write_file(emit / "fallback_kernels.cu", out.plan.fallback_source);
  }
  return out;
}

// A binary and where it came from; device binaries carry ptxas's report.
struct Binary {
  std::optional<std::string> bytes;  // none: not in the cache (yet)
  // Note [ptxas report]
  // Every device compile asks ptxas for its per-kernel report (-Xptxas=-v); the parsed report
  // travels with the binary in its cache entry (Note [Device cache payload] in ptxas_report.h).
  std::vector<KernelResources> resources;
  CacheHit hit = CacheHit::kMiss;
};

Binary look_up_binary(DiskCache& cache, const BinaryKey& key) {
  Binary found;
  CacheCounters before = cache.counters();
  found.bytes = cache.get(key.stored);
  CacheCounters after = cache.counters();
  count_stat(Stat::cache_corrupt,
             static_cast<int64_t>(after.corrupt_entries - before.corrupt_entries));
  if (!found.bytes) return found;
  found.hit = after.disk_hits > before.disk_hits ? CacheHit::kDisk : CacheHit::kMemory;
  if (key.arch == "host") return found;  // host entries hold the shared object itself
  std::string unpacked;
  if (unpack_device_payload(*found.bytes, &unpacked, &found.resources)) {
    found.bytes = std::move(unpacked);
    return found;
  }
  // Written by an older dyngen or damaged past its checksum: compile again.
  count_stat(Stat::cache_corrupt);
  cache.invalidate(key.stored);
  found.bytes.reset();
  found.hit = CacheHit::kMiss;
  return found;
}

// A fresh binary: the host compiler's shared object, or NVRTC's output with ptxas's report.
Step<std::string> compile_binary(const std::string& source, const BinaryKey& key,
                                 std::vector<KernelResources>* resources) {
  count_stat(Stat::nvrtc_compiles);
  if (key.arch == "host") {
    auto so = emu::EmuModule::compile_to_shared_object(host_source(source, key.source_name),
                                                       host_compile_options());
    if (!so.ok()) return failure(DG_ERR_COMPILE, "host compiler failed:\n" + so.message());
    return std::move(so).value();
  }
  std::vector<CudaHeader> headers;
  for (const EmbeddedFile& f : device_headers())
    headers.push_back({std::string(f.name), std::string(f.content)});
  auto compiled = nvrtc_compile(source, headers, device_compile_options(key.arch),
                                "dyngen_" + key.source_name + ".cu");
  if (!compiled.ok()) return failure(DG_ERR_COMPILE, compiled.message());
  *resources = parse_ptxas_log(compiled->log);
  return std::move(compiled->binary);
}

// The binary loaded (no module when the target cannot run here), compiled and cached first when
// the cache had none.
Step<std::unique_ptr<KernelModule>> build_and_load(Binary& binary, const std::string& source,
                                                   const BinaryKey& key,
                                                   const ResolvedTarget& target, DiskCache& cache) {
  const bool host = key.arch == "host";
  for (int attempt = 0;; ++attempt) {
    if (!binary.bytes) {
      binary.hit = CacheHit::kMiss;
      Step<std::string> compiled = compile_binary(source, key, &binary.resources);
      if (!compiled.ok()) return compiled.failure();
      binary.bytes = std::move(*compiled);
      // A failed write has already degraded the cache to memory and warned.
      (void)cache.put(key.stored,
                      host ? *binary.bytes : pack_device_payload(*binary.bytes, binary.resources));
    }
    if (!target.runnable) return std::unique_ptr<KernelModule>();
    int code = 0;
    auto loaded = host ? load_host_module(*binary.bytes)
                       : load_cuda_module(*binary.bytes, target.device, &code);
    if (loaded.ok()) return std::move(loaded).value();
    // Note [Failed module load is a miss]: only an image the driver refuses is dropped and
    // compiled again, once; any other failure (a sticky fault, no memory) leaves the entry.
    bool rejected = host || image_rejected(code);
    if (!rejected || attempt == 1)
      return failure(DG_ERR_INTERNAL, "cannot load kernels: " + loaded.message());
    cache.invalidate(key.stored);
    binary.bytes.reset();
  }
}

// Counts the time of a compile, however it ends, into compile_time_us.
class CompileTimer {
 public:
  ~CompileTimer() {
    auto elapsed = std::chrono::steady_clock::now() - start_;
    count_stat(Stat::compile_time_us,
               std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count());
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

void count_binary_lookup(CacheHit hit) {
  if (hit == CacheHit::kMemory) count_stat(Stat::cache_hits_memory);
  if (hit == CacheHit::kDisk) count_stat(Stat::cache_hits_disk);
  if (hit == CacheHit::kMiss) count_stat(Stat::cache_misses);
}

// Note [Fallbacks compiled on first need] (codegen/kernel_plan.h): the fallback kernels' module,
// built the first time the executable needs it, through the same cache as the first.
FallbackBuilder fallback_builder(const std::string& source, const ResolvedTarget& target,
                                 DiskCache& cache) {
  if (source.empty()) return nullptr;
  return [source, target, &cache]() -> Result<std::unique_ptr<KernelModule>> {
    Result<BinaryKey> key = binary_key(source, target);
    if (!key.ok()) return key.status();
    Binary binary = look_up_binary(cache, key.value());
    Step<std::unique_ptr<KernelModule>> module =
        build_and_load(binary, source, key.value(), target, cache);
    if (!module.ok()) return Status::error(module.failure().error);
    count_binary_lookup(binary.hit);
    count_stat(Stat::fallback_builds);
    return std::move(*module);
  };
}

// The executable, remembered for find_compiled.
CompileOutcome make_executable(GeneratedKernels generated, std::unique_ptr<KernelModule> module,
                               FallbackBuilder build_fallbacks, const Binary& binary,
                               const BinaryKey& key, const std::string& target,
                               const std::string& request_key) {
  auto exe = Executable::create(std::move(generated.optimized), std::move(generated.plan),
                                std::move(module), target, std::move(build_fallbacks));
  if (!exe.ok()) return failure(DG_ERR_UNSUPPORTED, exe.message());
  count_stat(Stat::graphs_compiled);
  CompileOutcome o;
  o.executable = exe.value();
  o.key = key.file;
  o.cache_hit = binary.hit;
  o.resources = binary.resources;
  std::lock_guard<std::mutex> lock(executables().mu);
  executables().by_request[request_key] = {o.key, o.executable, o.resources};
  return o;
}

}  // namespace

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
  const CompileTimer timer;
  Step<CompileJob> job = check_request(request);
  if (!job.ok()) return job.failure();
  // Passes and codegen run on the canonical form, so the source (and the key) does not depend on
  // Dynamo's symbol names; it is also what the graph's hash is taken of.
  const Graph canonical = canonicalize_symbols(input);
  const std::string request_key = hash_canonical_graph(canonical) + "|" + job->options_tag;
  if (std::optional<CompileOutcome> repeat = find_compiled(request_key, request)) return *repeat;

  Step<GeneratedKernels> generated = generate_kernels(canonical, *job, request);
  if (!generated.ok()) return generated.failure();
  const std::string& source = generated->plan.source;
  Result<BinaryKey> key = binary_key(source, job->target);
  if (!key.ok()) return failure(DG_ERR_INVALID_INPUT, key.message());
  DiskCache& cache = cache_for(request.cache_dir);
  Binary binary = look_up_binary(cache, key.value());
  Step<std::unique_ptr<KernelModule>> module =
      build_and_load(binary, source, key.value(), job->target, cache);
  if (!module.ok()) return module.failure();
  count_binary_lookup(binary.hit);
  FallbackBuilder fallbacks = fallback_builder(generated->plan.fallback_source, job->target, cache);
  return make_executable(std::move(*generated), std::move(*module), std::move(fallbacks), binary,
                         key.value(), job->target.name, request_key);
}

}  // namespace dg
