// `dyngen plan FILE --bind SYM=N ... [--gpu h200|a100] [--arch ARCH] [--baseline eager]
// [--disable-pass P ...] [--cache-dir DIR] [--json]`: the kernels a graph lowers to at one binding
// of its symbols, with launches, FLOPs, bytes, the roofline bound (Note [Roofline estimate]) and
// the achievable estimate for a named GPU (Note [Achievable estimate]), which reads the compiled
// kernels' ptxas report and SASS; optionally beside eager PyTorch (Note [Eager baseline]).
#include <iostream>

#include "codegen/emit_cuda.h"
#include "codegen/kernel_cost.h"
#include "frontends/cli/commands.h"
#include "frontends/cli/compile_flags.h"
#include "frontends/cli/plan_output.h"
#include "passes/pipeline.h"
#include "runtime/cached_binary.h"
#include "runtime/compiler.h"
#include "runtime/model/eager_baseline.h"
#include "runtime/model/perf_model.h"
#include "runtime/model/roofline.h"
#include "runtime/model/sass_tools.h"

namespace dg {

namespace {
constexpr const char* kUsage =
    "plan FILE --bind SYM=N [--bind ...] [--gpu h200|a100] [--arch sm_90a|sm_80] "
    "[--baseline eager] [--disable-pass NAME] [--cache-dir DIR] [--json | --explain]";

// Checks the bindings against the graph's symbols: every used symbol bound, no unknown name, each
// value within the symbol's declared range.
bool check_bindings(const Graph& g, const std::map<std::string, int64_t>& bindings,
                    const std::string& file, std::ostream& err) {
  std::string names;
  for (const SymExpr& s : g.symbols) names += (names.empty() ? "" : ", ") + s.symbol_name();
  for (const auto& [name, value] : bindings) {
    const SymExpr* sym = nullptr;
    for (const SymExpr& s : g.symbols)
      if (s.symbol_name() == name) sym = &s;
    if (!sym) {
      err << "dyngen: " << file << ": --bind " << name
          << ": no such symbol (the graph has: " << (names.empty() ? "none" : names) << ")\n";
      return false;
    }
    Interval r = sym->symbol_range();
    if (!r.contains(value) || value % sym->symbol_divisor() != 0) {
      err << "dyngen: " << file << ": --bind " << name << "=" << value
          << ": outside the symbol's facts (" << sym->to_string() << " in [" << r.lo << ", "
          << (r.hi == Interval::kPosInf ? std::string("inf") : std::to_string(r.hi)) << "] div "
          << sym->symbol_divisor() << ")\n";
      return false;
    }
  }
  for (const SymExpr& s : g.symbols) {
    if (!bindings.count(s.symbol_name())) {
      err << "dyngen: " << file << ": symbol " << s.symbol_name() << " needs a value: --bind "
          << s.symbol_name() << "=N\n";
      return false;
    }
  }
  return true;
}

// The arch the named GPU runs best: sm_90a on an H200, sm_80 on an A100.
std::string default_arch(const GpuSpec& gpu) { return gpu.name == "A100" ? "sm_80" : "sm_90a"; }

// The FLOPs of a kernel's fp32 contractions (the FFMA work of Note [Achievable estimate]).
std::optional<double> simt_contraction_flops(const Graph& g, const KernelLaunch& k,
                                             const std::map<std::string, int64_t>& bindings) {
  // Those on tensor cores are no FFMA work (KernelLaunch::split_terms, epilogue_mma_flops).
  if (k.split_terms > 0) return 0.0;
  double total = 0;
  for (int n : k.nodes) {
    const Node& node = g.nodes.at(n);
    if (op_info(node.op).category != OpCategory::kMatmul) continue;
    NodeFlops f = node_flops(g, node);
    std::optional<int64_t> v = (f.flops - f.tensor_flops).evaluate(bindings);
    if (!v) return std::nullopt;
    total += static_cast<double>(*v);
  }
  std::optional<int64_t> on_tensor = k.epilogue_mma_flops.evaluate(bindings);
  if (!on_tensor) return std::nullopt;
  return total - static_cast<double>(*on_tensor);
}

// Each kernel's SASS statistics, by name, from the compiled module in the cache; on failure an
// empty map and the reason in report->missing.
std::map<std::string, SassStats> read_sass(const Executable& exe, const std::string& arch,
                                           const std::string& cache_dir, PlanReport* report) {
  std::string why;
  report->cuobjdump = find_cuobjdump(&why);
  if (report->cuobjdump.empty()) {
    report->missing.push_back(why +
                              ": issue_seconds, latency_seconds and instructions_per_mma "
                              "are left out (set DYNGEN_CUOBJDUMP, or install the PyPI package "
                              "nvidia-cuda-cuobjdump into .venv)");
    return {};
  }
  auto cached = cached_device_binary(exe.plan().source, arch, cache_dir);
  std::string error;
  std::map<std::string, std::string> text;
  if (cached.ok()) text = sass_by_function(report->cuobjdump, cached->binary, &error);
  if (!cached.ok()) error = cached.message();
  if (text.empty()) {
    report->missing.push_back("the SASS could not be read (" + error +
                              "): issue_seconds, latency_seconds and instructions_per_mma are "
                              "left out");
    return {};
  }
  std::map<std::string, SassStats> stats;
  for (const auto& [name, sass] : text) stats[name] = analyze_sass(sass);
  return stats;
}

}  // namespace

int run_plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // --gpu and --baseline are ours; the rest are the flags compile and run share.
  std::string gpu_name = "h200", baseline;
  bool explain = false;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--explain") {
      explain = true;
      continue;
    }
    if (args[i] != "--gpu" && args[i] != "--baseline") {
      rest.push_back(args[i]);
      continue;
    }
    if (i + 1 >= args.size()) {
      err << "dyngen: " << args[i] << " needs a value; usage: dyngen " << kUsage << "\n";
      return kExitInvalidInput;
    }
    (args[i] == "--gpu" ? gpu_name : baseline) = args[i + 1];
    ++i;
  }
  CompileFlags flags;
  if (!parse_compile_flags(rest, kUsage, /*allow_bind=*/true, &flags, err))
    return kExitInvalidInput;
  if (flags.help) {
    out << "usage: dyngen " << kUsage << "\n"
        << "Lowers and compiles a graph (NVRTC; no GPU needed) and prints per "
           "kernel and in total:\n"
           "launches, FLOPs, bytes, CTAs, CTAs per SM, waves, main-loop "
           "instructions per MMA, the\n"
           "roofline bound and the achievable time ESTIMATE for the named GPU "
           "(default h200;\n"
           "known: "
        << known_gpus()
        << "), from the kernels' ptxas report and SASS (cuobjdump), and the "
           "workspace size.\n"
           "--arch: the arch to compile for (default: sm_90a for h200, sm_80 "
           "for a100).\n"
           "--baseline eager: also estimate eager PyTorch on the unfused "
           "graph, and the ratio.\n"
           "--disable-pass NAME skips a pass, e.g. a fusion pass, for the "
           "unfused figures;\n"
           "--disable-pass wgmma keeps sm_90a GEMMs on mma.sync (no wgmma or TMA).\n"
           "--explain: per kernel, the phases and bounds behind its estimate and which one sets\n"
           "it (--json gives the same figures under each kernel's \"phases\" and \"bounds\").\n";
    return kExitOk;
  }
  std::optional<GpuSpec> gpu = find_gpu(gpu_name);
  if (!gpu) {
    err << "dyngen: unknown --gpu '" << gpu_name << "' (known: " << known_gpus()
        << "); usage: dyngen " << kUsage << "\n";
    return kExitInvalidInput;
  }
  if (!baseline.empty() && baseline != "eager") {
    err << "dyngen: unknown --baseline '" << baseline << "' (known: eager); usage: dyngen "
        << kUsage << "\n";
    return kExitInvalidInput;
  }
  if (explain && flags.json) {
    err << "dyngen: --explain and --json: choose one (the JSON holds the breakdown); usage: "
           "dyngen "
        << kUsage << "\n";
    return kExitInvalidInput;
  }
  if (!flags.emit_dir.empty()) {
    err << "dyngen: plan writes no files: --emit does not apply; usage: dyngen " << kUsage << "\n";
    return kExitInvalidInput;
  }
  std::string arch = flags.arch.empty() ? default_arch(*gpu) : flags.arch;
  if (arch.rfind("sm_", 0) != 0) {
    err << "dyngen: plan --arch " << arch << ": the model reads device code; give an sm_ arch "
        << "such as sm_90a or sm_80\n";
    return kExitInvalidInput;
  }
  auto graph = load_or_report(flags.file, err);
  if (!graph) return kExitInvalidInput;
  if (!check_bindings(*graph, flags.bindings, flags.file, err)) return kExitInvalidInput;
  if (std::string bad = unknown_disabled_pass(flags.disabled_passes); !bad.empty()) {
    err << "dyngen: " << bad << "\n";
    return kExitInvalidInput;
  }

  KernelPlan plan;
  Graph optimized;
  try {
    PipelineOptions popts;
    popts.disabled = flags.disabled_passes;
    optimized = run_pipeline(*graph, popts);
    plan = emit_cuda(optimized, codegen_options_for(arch, flags.disabled_passes));
  } catch (const UnsupportedError& e) {
    err << "dyngen: " << flags.file << ": " << e.what() << "\n";
    return kExitUnsupported;
  }
  std::string error;
  std::optional<PlanEstimate> est = estimate_plan(plan, flags.bindings, *gpu, &error);
  if (!est) {
    err << "dyngen: " << flags.file << ": " << error << "\n";
    return kExitInvalidInput;
  }
  // The compiled module (from the cache when it is there): ptxas's report and the SASS.
  CompileRequest request = flags.request();
  request.target = arch;
  int exit_code = 0;
  std::optional<CompileOutcome> compiled =
      compile_or_report(*graph, request, flags.file, err, &exit_code);
  if (!compiled) return exit_code;
  const KernelPlan& built = compiled->executable->plan();

  PlanReport report;
  report.flags = &flags;
  report.gpu = *gpu;
  report.arch = arch;
  if (compiled->resources.empty())
    report.missing.push_back(
        "ptxas report: the cached binary has none; registers and static "
        "shared memory are not counted in ctas_per_sm");
  std::map<std::string, SassStats> sass =
      read_sass(*compiled->executable, arch, request.cache_dir, &report);
  report.sass = !sass.empty();
  report.roofline = std::move(*est);
  for (const KernelEstimate& e : report.roofline.kernels) {
    const KernelLaunch& k = *e.kernel;
    const KernelLaunch* twin = nullptr;
    for (const KernelLaunch& b : built.kernels)
      if (b.name == k.name) twin = &b;
    if (!twin || twin->block != k.block || twin->shared_bytes != k.shared_bytes) {
      err << "dyngen: internal error: kernel " << k.name
          << " of the plan differs from the compiled module's\n";
      return kExitInternalError;
    }
    KernelModelInput in;
    in.roofline = &e;
    in.threads_per_block = k.block[0] * k.block[1] * k.block[2];
    in.dynamic_shared_bytes = k.shared_bytes;
    std::optional<double> simt = simt_contraction_flops(optimized, k, flags.bindings);
    if (!simt) {
      err << "dyngen: " << flags.file << ": cannot evaluate " << k.name << "'s FLOPs\n";
      return kExitInvalidInput;
    }
    in.simt_contraction_flops = e.launched ? *simt : 0;
    for (const KernelResources& r : compiled->resources)
      if (r.name == k.name) in.resources = &r;
    auto it = sass.find(k.name);
    if (it != sass.end()) in.sass = &it->second;
    if (it == sass.end() && !sass.empty()) in.no_sass_reason = "not in the module's SASS listing";
    report.models.push_back(model_kernel(in, *gpu));
    if (e.launched) report.estimated_seconds += report.models.back().estimated_seconds;
  }
  if (baseline == "eager") {
    report.eager = estimate_eager(*graph, flags.bindings, *gpu, kLaunchSeconds, &error);
    if (!report.eager) {
      err << "dyngen: " << flags.file << ": " << error << "\n";
      return kExitInvalidInput;
    }
  }
  // Workspace per token: per unit of the graph's first symbol (the token count in the graphs dyngen
  // gets from Dynamo), when there is one and it is bound to a positive value.
  if (!graph->symbols.empty()) {
    report.per_symbol = graph->symbols[0].symbol_name();
    report.per_value = flags.bindings.at(report.per_symbol);
  }
  if (flags.json)
    print_plan_json(report, out);
  else
    print_plan_text(report, out);
  if (explain) print_plan_explanation(report, out);
  return kExitOk;
}

}  // namespace dg
