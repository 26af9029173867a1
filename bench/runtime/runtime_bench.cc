// What a compile and a call cost on the host, for the seed's expert MLP graph:
//   BM_ColdCompile       passes + codegen + NVRTC (sm_90a) into an empty cache folder
//   BM_DiskCacheLoad     a new process's first compile: the binary comes from the disk cache
//   BM_MemoryCacheHit    a repeat compile in the same process
//   BM_LaunchPrepare     per call: bind symbols, run the shape program, size outputs/workspace
//   BM_LaunchPack        per call: prepare + every kernel's grid and argument pointers
// Run: build/bench/runtime_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/text_format.h"
#include "runtime/compiler.h"
#include "runtime/disk_cache.h"

namespace dg {
namespace {

Graph seed_graph() {
  std::ifstream f(std::string(DG_FIXTURES_DIR) + "/seed_expert_mlp.dgir");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_graph_text(ss.str()).graph;
}

std::string temp_dir(const std::string& tag) {
  auto d = std::filesystem::temp_directory_path() /
           ("dyngen-bench-" + tag + "-" + std::to_string(::getpid()));
  return d.string();
}

// A graph that hashes differently on every iteration, so nothing is cached.
Graph renamed_variant(const Graph& g, int i) {
  Graph v = g;
  v.nodes.back().attrs.set("bench_variant", int64_t{i});
  return v;
}

void BM_ColdCompile(benchmark::State& state) {
  Graph g = seed_graph();
  std::string dir = temp_dir("cold");
  int i = 0;
  for (auto _ : state) {
    CompileRequest req;
    req.target = "sm_90a";
    req.cache_dir = dir + "/" + std::to_string(i);
    CompileOutcome o = compile_graph(g, req);
    if (!o.ok() || o.cache_hit != CacheHit::kMiss) state.SkipWithError("expected a cold compile");
    // Different folder each time; the in-process executable cache is keyed without the folder,
    // so vary the graph too.
    g = renamed_variant(seed_graph(), ++i);
  }
  std::filesystem::remove_all(dir);
}

void BM_DiskCacheLoad(benchmark::State& state) {
  // Fill a folder once, then measure what a fresh process pays: read + verify the entry. (A graph
  // variant of its own, so the in-process executable cache cannot answer instead of the folder.)
  // Google Benchmark may call this function several times: each call gets its own graph variant
  // and folder.
  static int call = 0;
  ++call;
  Graph g = renamed_variant(seed_graph(), -call);
  std::string dir = temp_dir("disk" + std::to_string(call));
  CompileRequest req;
  req.target = "sm_90a";
  req.cache_dir = dir;
  CompileOutcome first = compile_graph(g, req);
  if (!first.ok()) {
    state.SkipWithError(first.error.c_str());
    return;
  }
  for (auto _ : state) {
    DiskCacheOptions options;
    options.dir = dir;
    DiskCache fresh(options);  // a new process's cache object: empty memory tier
    auto bytes = fresh.get(first.key);
    if (!bytes) {
      state.SkipWithError("entry missing");
      break;
    }
    benchmark::DoNotOptimize(bytes);
  }
  std::filesystem::remove_all(dir);
}

void BM_MemoryCacheHit(benchmark::State& state) {
  Graph g = seed_graph();
  CompileRequest req;
  req.target = "sm_90a";
  req.cache_dir = temp_dir("mem");
  compile_graph(g, req);
  for (auto _ : state) {
    CompileOutcome o = compile_graph(g, req);
    if (o.cache_hit != CacheHit::kMemory) state.SkipWithError("expected a memory hit");
  }
  std::filesystem::remove_all(req.cache_dir);
}

struct CallFixture {
  std::shared_ptr<Executable> exe;
  std::vector<dg_tensor> inputs, outputs;
  std::vector<char> fake;  // pack() only computes addresses; nothing is read or written
};

CallFixture call_fixture(int64_t tokens) {
  CallFixture f;
  CompileRequest req;
  req.target = "sm_90a";
  req.cache_dir = temp_dir("call");
  f.exe = compile_graph(seed_graph(), req).executable;
  const Graph& g = f.exe->graph();
  f.fake.resize(64);
  for (ValueId in : g.inputs) {
    dg_tensor t{};
    const Value& v = g.value(in);
    if (v.kind == ValueKind::kSymInt) {
      t.rank = -1;
      t.shape[0] = tokens;
    } else {
      t.data = f.fake.data();
      t.device_type = DG_DEVICE_CUDA;  // an sm_90a executable takes device 0's tensors
      t.rank = v.type.rank();
      t.dtype = static_cast<int32_t>(v.type.dtype);
      for (int d = 0; d < t.rank; ++d)
        t.shape[d] = v.type.shape[d].evaluate({{"s0", tokens}}).value_or(tokens);
    }
    f.inputs.push_back(t);
  }
  f.outputs.resize(g.outputs.size());
  size_t ws = 0;
  (void)f.exe->prepare(f.inputs.data(), static_cast<int>(f.inputs.size()), f.outputs.data(),
                       static_cast<int>(f.outputs.size()), &ws);
  for (auto& o : f.outputs) {
    o.data = f.fake.data();
    o.device_type = DG_DEVICE_CUDA;
  }
  return f;
}

void BM_LaunchPrepare(benchmark::State& state) {
  CallFixture f = call_fixture(state.range(0));
  size_t ws = 0;
  for (auto _ : state) {
    Status s = f.exe->prepare(f.inputs.data(), static_cast<int>(f.inputs.size()), f.outputs.data(),
                              static_cast<int>(f.outputs.size()), &ws);
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(ws);
  }
}

void BM_LaunchPack(benchmark::State& state) {
  CallFixture f = call_fixture(state.range(0));
  LaunchBatch batch;
  size_t ws = 0;
  for (auto _ : state) {
    Status s = f.exe->prepare(f.inputs.data(), static_cast<int>(f.inputs.size()), f.outputs.data(),
                              static_cast<int>(f.outputs.size()), &ws);
    s = f.exe->pack(f.inputs.data(), static_cast<int>(f.inputs.size()), f.outputs.data(),
                    static_cast<int>(f.outputs.size()), f.fake.data(), &batch);
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(batch.args.data());
  }
  state.counters["kernels"] = static_cast<double>(f.exe->plan().kernels.size());
}

BENCHMARK(BM_ColdCompile)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_DiskCacheLoad)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MemoryCacheHit)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LaunchPrepare)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LaunchPack)->Arg(512)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dg

BENCHMARK_MAIN();
