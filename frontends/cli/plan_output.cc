#include "frontends/cli/plan_output.h"

#include <cstdio>

#include "runtime/json_escape.h"

namespace dg {

namespace {

constexpr const char* kEstimateNote =
    "ESTIMATE (a model, not a measurement): per kernel the achievable time is "
    "launch + max(tensor "
    "+ SIMT pipes, issue rate from the kernel's SASS, DRAM bytes, serial-loop "
    "latency), each "
    "for the busiest SM over its waves (Note [Achievable estimate]); the "
    "roofline bound is "
    "max(tensor FLOPs / dense bf16 peak + other FLOPs / fp32 peak, compulsory "
    "bytes / DRAM "
    "bandwidth) over the whole GPU";
constexpr const char* kEagerNote =
    "ESTIMATE of eager PyTorch on the unfused graph: one kernel per ATen op, "
    "GEMMs at cuBLAS's "
    "published efficiency with wave utilisation, the rest at DRAM bandwidth, a "
    "host dispatch "
    "per op as the floor (Note [Eager baseline])";

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string num(double v) { return fmt("%.0f", v); }
std::string sci(double v) { return fmt("%.6g", v); }
std::string opt(const std::optional<double>& v) { return v ? sci(*v) : "null"; }

std::string list(const std::vector<std::string>& items) {
  std::string j = "[";
  for (size_t i = 0; i < items.size(); ++i) j += (i ? ", " : "") + json_escape(items[i]);
  return j + "]";
}

std::vector<std::string> underfilled(const PlanReport& r) {
  std::vector<std::string> names;
  for (size_t k = 0; k < r.models.size(); ++k)
    if (r.models[k].underfills_gpu) names.push_back(r.roofline.kernels[k].kernel->name);
  return names;
}

}  // namespace

void print_plan_text(const PlanReport& r, std::ostream& out) {
  const CompileFlags& f = *r.flags;
  const GpuSpec& gpu = r.gpu;
  out << "graph: " << f.file << "\nbinding:";
  for (const auto& [k, v] : f.bindings) out << " " << k << "=" << v;
  out << "\ngpu:   " << gpu.name << " (" << num(gpu.tensor_flops / 1e12)
      << " TFLOP/s dense bf16 tensor, " << fmt("%.1f", gpu.simt_flops / 1e12)
      << " TFLOP/s fp32 SIMT, " << fmt("%.1f", gpu.bytes_per_second / 1e12) << " TB/s, " << gpu.sms
      << " SMs at " << fmt("%.2f", gpu.clock_hz / 1e9) << " GHz); kernels for " << r.arch << "\n";
  if (!f.disabled_passes.empty()) {
    out << "disabled passes:";
    for (const std::string& d : f.disabled_passes) out << " " << d;
    out << "\n";
  }
  out << kEstimateNote << ".\n";
  for (const std::string& m : r.missing) out << "not filled: " << m << "\n";
  out << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-26s %10s %10s %6s %6s %5s %8s %9s %9s %-8s  %s\n", "kernel",
                "MFLOP", "KB", "CTAs", "CTA/SM", "waves", "inst/MMA", "roof. us", "est. us",
                "limiter", "summary");
  out << line;
  for (size_t k = 0; k < r.models.size(); ++k) {
    const KernelEstimate& e = r.roofline.kernels[k];
    const KernelModel& m = r.models[k];
    if (!e.launched) {
      std::snprintf(line, sizeof line, "%-26s %10s %10s %6s %6s %5s %8s %9s %9s %-8s  %s\n",
                    e.kernel->name.c_str(), "-", "-", "0", "-", "-", "-", "-", "-", "skip",
                    e.kernel->summary.c_str());
    } else {
      std::string ipm = m.instructions_per_mma ? fmt("%.1f", *m.instructions_per_mma) : "-";
      if (m.instructions_per_mma && m.main_loop_inner_loops > 0) ipm += "+";
      std::snprintf(line, sizeof line,
                    "%-26s %10.3f %10.1f %6.0f %6d %5.0f %8s %9.3f %9.3f %-8s  %s\n",
                    e.kernel->name.c_str(), e.flops / 1e6, e.bytes / 1e3, m.ctas, m.ctas_per_sm,
                    m.waves, ipm.c_str(), m.roofline_seconds * 1e6, m.estimated_seconds * 1e6,
                    m.limiter.c_str(), e.kernel->summary.c_str());
    }
    out << line;
  }
  out << "(inst/MMA: main-loop SASS instructions per tensor-core MMA; '+': the "
         "loop holds inner "
         "loops, counted once)\n";
  const PlanEstimate& p = r.roofline;
  out << "\ntotal: " << p.launches << " launches, " << fmt("%.3f", p.flops / 1e9) << " GFLOP ("
      << fmt("%.3f", p.tensor_flops / 1e9) << " on tensor cores), " << fmt("%.3f", p.bytes / 1e6)
      << " MB, " << fmt("%.2f", p.intensity()) << " FLOP/B; estimated "
      << fmt("%.2f", r.estimated_seconds * 1e6) << " us on " << gpu.name << " (roofline bound "
      << fmt("%.2f", p.seconds * 1e6) << " us)\n";
  std::vector<std::string> under = underfilled(r);
  out << "kernels over " << num(kUnderfillFlops / 1e6) << " MFLOP with fewer CTAs than " << gpu.sms
      << " SMs: " << under.size();
  for (const std::string& n : under) out << " " << n;
  out << "\n";
  if (r.eager) {
    out << "baseline: eager PyTorch estimated " << fmt("%.2f", r.eager->seconds * 1e6) << " us ("
        << r.eager->calls << " ATen calls, " << r.eager->kernels << " kernels; host "
        << fmt("%.1f", r.eager->host_seconds * 1e6) << " us, device "
        << fmt("%.1f", r.eager->device_seconds * 1e6) << " us of which GEMMs "
        << fmt("%.1f", r.eager->gemm_seconds * 1e6)
        << " us); ratio dyngen / eager = " << fmt("%.3f", r.estimated_seconds / r.eager->seconds)
        << "\n"
        << kEagerNote << ".\n";
  }
  out << "workspace: " << num(p.workspace_bytes) << " bytes";
  if (r.per_value > 0)
    out << " (" << fmt("%.1f", p.workspace_bytes / static_cast<double>(r.per_value))
        << " per token of " << r.per_symbol << ")";
  out << "\n";
}

void print_plan_json(const PlanReport& r, std::ostream& out) {
  const CompileFlags& f = *r.flags;
  const GpuSpec& gpu = r.gpu;
  const PlanEstimate& p = r.roofline;
  std::string j =
      "{\"file\": " + json_escape(f.file) + ", \"estimate\": " + json_escape(kEstimateNote) +
      ", \"gpu\": {\"name\": " + json_escape(gpu.name) +
      ", \"tensor_flops_per_s\": " + num(gpu.tensor_flops) +
      ", \"simt_flops_per_s\": " + num(gpu.simt_flops) +
      ", \"bytes_per_s\": " + num(gpu.bytes_per_second) + ", \"sms\": " + std::to_string(gpu.sms) +
      ", \"clock_hz\": " + num(gpu.clock_hz) + "}, \"model\": {\"arch\": " + json_escape(r.arch) +
      ", \"cuobjdump\": " + (r.cuobjdump.empty() ? "null" : json_escape(r.cuobjdump)) +
      ", \"sass\": " + (r.sass ? "true" : "false") +
      ", \"launch_seconds\": " + sci(kLaunchSeconds) + ", \"missing\": " + list(r.missing) +
      "}, \"bindings\": {";
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
    const KernelModel& m = r.models[k];
    j += std::string(k ? ", " : "") + "{\"name\": " + json_escape(e.kernel->name) +
         ", \"summary\": " + json_escape(e.kernel->summary) +
         ", \"launched\": " + (e.launched ? "true" : "false") + ", \"nodes\": [";
    for (size_t n = 0; n < e.kernel->nodes.size(); ++n)
      j += (n ? ", " : "") + std::to_string(e.kernel->nodes[n]);
    j += "], \"flops\": " + num(e.flops) + ", \"tensor_flops\": " + num(e.tensor_flops) +
         ", \"bytes\": " + num(e.bytes) + ", \"intensity\": " + sci(e.intensity()) +
         ", \"threads_per_cta\": " +
         std::to_string(e.kernel->block[0] * e.kernel->block[1] * e.kernel->block[2]) +
         ", \"registers\": " + (m.registers >= 0 ? std::to_string(m.registers) : "null") +
         ", \"shared_bytes_per_cta\": " + num(static_cast<double>(m.shared_bytes)) +
         ", \"ctas\": " + num(m.ctas) + ", \"ctas_per_sm\": " + std::to_string(m.ctas_per_sm) +
         ", \"occupancy_limit\": " + json_escape(m.occupancy_limit) +
         ", \"waves\": " + num(m.waves) +
         ", \"instructions_per_mma\": " + opt(m.instructions_per_mma) +
         ", \"main_loop_inner_loops\": " +
         (m.instructions_per_mma ? std::to_string(m.main_loop_inner_loops) : "null") +
         ", \"bounds\": {\"tensor_seconds\": " + sci(m.tensor_seconds) +
         ", \"simt_seconds\": " + sci(m.simt_seconds) +
         ", \"memory_seconds\": " + sci(m.memory_seconds) +
         ", \"issue_seconds\": " + opt(m.issue_seconds) +
         ", \"latency_seconds\": " + opt(m.latency_seconds) +
         ", \"launch_seconds\": " + sci(m.launch_seconds) +
         "}, \"limiter\": " + json_escape(m.limiter) +
         ", \"underfills_gpu\": " + (m.underfills_gpu ? "true" : "false") +
         ", \"estimated_seconds\": " + sci(m.estimated_seconds) +
         ", \"roofline_seconds\": " + sci(m.roofline_seconds) +
         ", \"bound\": " + json_escape(e.memory_bound() ? "memory" : "compute") +
         ", \"missing\": " + list(m.missing) + "}";
  }
  j += "], \"total\": {\"launches\": " + std::to_string(p.launches) +
       ", \"flops\": " + num(p.flops) + ", \"tensor_flops\": " + num(p.tensor_flops) +
       ", \"bytes\": " + num(p.bytes) + ", \"intensity\": " + sci(p.intensity()) +
       ", \"estimated_seconds\": " + sci(r.estimated_seconds) +
       ", \"roofline_seconds\": " + sci(p.seconds) +
       ", \"underfilled_kernels\": " + list(underfilled(r)) + "}";
  if (r.eager) {
    j += ", \"baseline\": {\"kind\": \"eager\", \"estimate\": " + json_escape(kEagerNote) +
         ", \"estimated_seconds\": " + sci(r.eager->seconds) +
         ", \"calls\": " + std::to_string(r.eager->calls) +
         ", \"kernels\": " + std::to_string(r.eager->kernels) +
         ", \"host_seconds\": " + sci(r.eager->host_seconds) +
         ", \"device_seconds\": " + sci(r.eager->device_seconds) +
         ", \"gemm_seconds\": " + sci(r.eager->gemm_seconds) +
         ", \"dispatch_seconds_per_call\": " + sci(kEagerDispatchSeconds) +
         "}, \"ratio\": " + sci(r.estimated_seconds / r.eager->seconds);
  }
  j += ", \"workspace_bytes\": " + num(p.workspace_bytes);
  if (r.per_value > 0)
    j += ", \"workspace_bytes_per_token\": " +
         sci(p.workspace_bytes / static_cast<double>(r.per_value)) +
         ", \"per_token_symbol\": " + json_escape(r.per_symbol);
  out << j << "}\n";
}

}  // namespace dg
