// `dyngen plan FILE --bind SYM=N ... [--gpu h200|a100] [--disable-pass P ...] [--json]`: the
// kernels a graph lowers to, with launches, FLOPs, bytes and a roofline estimate for a named GPU
// at one binding of its symbols (Note [Roofline estimate]). Nothing is compiled.
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "codegen/emit_cuda.h"
#include "codegen/roofline.h"
#include "frontends/cli/commands.h"
#include "frontends/cli/compile_flags.h"
#include "passes/pipeline.h"
#include "runtime/json_escape.h"

namespace dg {

namespace {
constexpr const char* kUsage =
    "plan FILE --bind SYM=N [--bind ...] [--gpu h200|a100] [--disable-pass NAME] [--json]";

constexpr const char* kEstimateNote =
    "ESTIMATE (roofline lower bound, not a measurement): per kernel max(tensor FLOPs / dense "
    "bf16 tensor peak + other FLOPs / fp32 SIMT peak, compulsory bytes / DRAM bandwidth); launch "
    "latency, caches and occupancy are not modelled";

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string num(double v) { return fmt("%.0f", v); }

// Checks the bindings against the graph's symbols: every used symbol bound, no unknown name,
// each value within the symbol's declared range.
bool check_bindings(const Graph& g, const std::map<std::string, int64_t>& bindings,
                    const std::string& file, std::ostream& err) {
  std::string names;
  for (const SymExpr& s : g.symbols) names += (names.empty() ? "" : ", ") + s.symbol_name();
  for (const auto& [name, value] : bindings) {
    const SymExpr* sym = nullptr;
    for (const SymExpr& s : g.symbols)
      if (s.symbol_name() == name) sym = &s;
    if (!sym) {
      err << "dyngen: " << file << ": --bind " << name << ": no such symbol (the graph has: "
          << (names.empty() ? "none" : names) << ")\n";
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
      err << "dyngen: " << file << ": symbol " << s.symbol_name()
          << " needs a value: --bind " << s.symbol_name() << "=N\n";
      return false;
    }
  }
  return true;
}

void print_text(const PlanEstimate& p, const GpuSpec& gpu, const CompileFlags& f,
                const std::string& per_symbol, int64_t per_value, std::ostream& out) {
  out << "graph: " << f.file << "\nbinding:";
  for (const auto& [k, v] : f.bindings) out << " " << k << "=" << v;
  out << "\ngpu:   " << gpu.name << " (" << num(gpu.tensor_flops / 1e12)
      << " TFLOP/s dense bf16 tensor, " << fmt("%.1f", gpu.simt_flops / 1e12)
      << " TFLOP/s fp32 SIMT, " << fmt("%.1f", gpu.bytes_per_second / 1e12) << " TB/s)\n";
  if (!f.disabled_passes.empty()) {
    out << "disabled passes:";
    for (const std::string& d : f.disabled_passes) out << " " << d;
    out << "\n";
  }
  out << kEstimateNote << ".\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-28s %12s %12s %8s %10s %6s  %s\n", "kernel", "MFLOP", "KB",
                "FLOP/B", "est. us", "bound", "summary");
  out << line;
  for (const KernelEstimate& e : p.kernels) {
    if (!e.launched) {
      std::snprintf(line, sizeof line, "%-28s %12s %12s %8s %10s %6s  %s\n",
                    e.kernel->name.c_str(), "-", "-", "-", "-", "skip",
                    e.kernel->summary.c_str());
    } else {
      std::snprintf(line, sizeof line, "%-28s %12.3f %12.1f %8.2f %10.3f %6s  %s\n",
                    e.kernel->name.c_str(), e.flops / 1e6, e.bytes / 1e3, e.intensity(),
                    e.seconds() * 1e6, e.memory_bound() ? "memory" : "compute",
                    e.kernel->summary.c_str());
    }
    out << line;
  }
  out << "\ntotal: " << p.launches << " launches, " << fmt("%.3f", p.flops / 1e9) << " GFLOP ("
      << fmt("%.3f", p.tensor_flops / 1e9) << " on tensor cores), " << fmt("%.3f", p.bytes / 1e6)
      << " MB, " << fmt("%.2f", p.intensity()) << " FLOP/B, estimated "
      << fmt("%.2f", p.seconds * 1e6) << " us on " << gpu.name << " (roofline estimate)\n";
  out << "workspace: " << num(p.workspace_bytes) << " bytes";
  if (per_value > 0)
    out << " (" << fmt("%.1f", p.workspace_bytes / static_cast<double>(per_value))
        << " per token of " << per_symbol << ")";
  out << "\n";
}

void print_json(const PlanEstimate& p, const GpuSpec& gpu, const CompileFlags& f,
                const std::string& per_symbol, int64_t per_value, std::ostream& out) {
  std::string j = "{\"file\": " + json_escape(f.file) + ", \"estimate\": " +
                  json_escape(kEstimateNote) + ", \"gpu\": {\"name\": " + json_escape(gpu.name) +
                  ", \"tensor_flops_per_s\": " + num(gpu.tensor_flops) +
                  ", \"simt_flops_per_s\": " + num(gpu.simt_flops) +
                  ", \"bytes_per_s\": " + num(gpu.bytes_per_second) + "}, \"bindings\": {";
  bool first = true;
  for (const auto& [k, v] : f.bindings) {
    j += (first ? "" : ", ") + json_escape(k) + ": " + std::to_string(v);
    first = false;
  }
  j += "}, \"disabled_passes\": [";
  first = true;
  for (const std::string& d : f.disabled_passes) {
    j += (first ? "" : ", ") + json_escape(d);
    first = false;
  }
  j += "], \"kernels\": [";
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const KernelEstimate& e = p.kernels[k];
    j += std::string(k ? ", " : "") + "{\"name\": " + json_escape(e.kernel->name) +
         ", \"summary\": " + json_escape(e.kernel->summary) +
         ", \"launched\": " + (e.launched ? "true" : "false") + ", \"nodes\": [";
    for (size_t n = 0; n < e.kernel->nodes.size(); ++n)
      j += (n ? ", " : "") + std::to_string(e.kernel->nodes[n]);
    j += "], \"flops\": " + num(e.flops) + ", \"tensor_flops\": " + num(e.tensor_flops) +
         ", \"bytes\": " + num(e.bytes) + ", \"intensity\": " + fmt("%.6g", e.intensity()) +
         ", \"estimated_seconds\": " + fmt("%.6g", e.seconds()) +
         ", \"bound\": " + json_escape(e.memory_bound() ? "memory" : "compute") + "}";
  }
  j += "], \"total\": {\"launches\": " + std::to_string(p.launches) +
       ", \"flops\": " + num(p.flops) + ", \"tensor_flops\": " + num(p.tensor_flops) +
       ", \"bytes\": " + num(p.bytes) + ", \"intensity\": " + fmt("%.6g", p.intensity()) +
       ", \"estimated_seconds\": " + fmt("%.6g", p.seconds) + "}, \"workspace_bytes\": " +
       num(p.workspace_bytes);
  if (per_value > 0)
    j += ", \"workspace_bytes_per_token\": " +
         fmt("%.6g", p.workspace_bytes / static_cast<double>(per_value)) +
         ", \"per_token_symbol\": " + json_escape(per_symbol);
  out << j << "}\n";
}

}  // namespace

int run_plan_command(const std::vector<std::string>& args, std::ostream& out,
                     std::ostream& err) {
  // --gpu is ours; the rest are the flags compile and run share.
  std::string gpu_name = "h200";
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] != "--gpu") {
      rest.push_back(args[i]);
      continue;
    }
    if (i + 1 >= args.size()) {
      err << "dyngen: --gpu needs a value; usage: dyngen " << kUsage << "\n";
      return kExitInvalidInput;
    }
    gpu_name = args[++i];
  }
  CompileFlags flags;
  if (!parse_compile_flags(rest, kUsage, /*allow_bind=*/true, &flags, err))
    return kExitInvalidInput;
  if (flags.help) {
    out << "usage: dyngen " << kUsage << "\n"
        << "Lowers a graph (passes and codegen, no compile) and prints per kernel and in total:\n"
           "launches, FLOPs, bytes, arithmetic intensity and a roofline time estimate for the\n"
           "named GPU (default h200; known: " << known_gpus() << "), and the workspace size.\n"
           "--disable-pass NAME skips a pass, e.g. a fusion pass, for the unfused figures.\n";
    return kExitOk;
  }
  std::optional<GpuSpec> gpu = find_gpu(gpu_name);
  if (!gpu) {
    err << "dyngen: unknown --gpu '" << gpu_name << "' (known: " << known_gpus()
        << "); usage: dyngen " << kUsage << "\n";
    return kExitInvalidInput;
  }
  if (!flags.arch.empty() || !flags.cache_dir.empty() || !flags.emit_dir.empty()) {
    err << "dyngen: plan compiles nothing: --arch, --cache-dir and --emit do not apply; usage: "
           "dyngen "
        << kUsage << "\n";
    return kExitInvalidInput;
  }
  auto graph = load_or_report(flags.file, err);
  if (!graph) return kExitInvalidInput;
  if (!check_bindings(*graph, flags.bindings, flags.file, err)) return kExitInvalidInput;
  for (const std::string& p : flags.disabled_passes) {
    std::vector<std::string> names = pipeline_pass_names();
    if (std::find(names.begin(), names.end(), p) == names.end()) {
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      err << "dyngen: --disable-pass " << p << ": no such pass (passes: " << known << ")\n";
      return kExitInvalidInput;
    }
  }

  KernelPlan plan;
  try {
    PipelineOptions popts;
    popts.disabled = flags.disabled_passes;
    Graph optimized = run_pipeline(*graph, popts);
    plan = emit_cuda(optimized);
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
  // Workspace per token: per unit of the graph's first symbol (the token count in the graphs
  // dyngen gets from Dynamo), when there is one and it is bound to a positive value.
  std::string per_symbol;
  int64_t per_value = 0;
  if (!graph->symbols.empty()) {
    per_symbol = graph->symbols[0].symbol_name();
    per_value = flags.bindings.at(per_symbol);
  }
  if (flags.json) print_json(*est, *gpu, flags, per_symbol, per_value, out);
  else print_text(*est, *gpu, flags, per_symbol, per_value, out);
  return kExitOk;
}

}  // namespace dg
