#include "frontends/cli/plan_output.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "runtime/json_text.h"

namespace dg {

namespace {

constexpr const char* kEstimateNote =
    "ESTIMATE (a model, not a measurement): per kernel the achievable time is "
    "launch + max(tensor "
    "+ SIMT pipes, issue rate from the kernel's SASS, shared-memory bytes, DRAM bytes, "
    "serial-loop latency, and for GEMMs the prologue, main loop and epilogue in series), each "
    "for the busiest SM over its waves, tensor cores at most 0.73 of the peak (Note [Achievable "
    "estimate]); the "
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

// Note [Plan figures in JSON]
// Counts (FLOPs, bytes, CTAs, waves) are JSON integers; the model's seconds and ratios are JSON
// floats (0.0, never 0) rounded to six significant digits: they are estimates, and six digits
// are what the report printed before the JSON library, so two plans compare as they did. A
// count too large for an int64 stays a float.
Json whole(double v) {
  if (std::isfinite(v) && std::fabs(v) < 9e18) return static_cast<int64_t>(std::llround(v));
  return v;
}
// The model's figures in JSON (Note [Plan figures in JSON]).
Json six_digits(double v) { return std::strtod(fmt("%.6g", v).c_str(), nullptr); }
Json six_digits(const std::optional<double>& v) { return v ? six_digits(*v) : Json(nullptr); }

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
  out << "(inst/MMA: main-loop SASS instructions per tensor-core MMA instruction, an HGMMA "
         "counted once; '+': the loop holds inner loops, counted once)\n";
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

namespace {

Json kernel_json(const KernelEstimate& e, const KernelModel& m) {
  const KernelLaunch& kl = *e.kernel;
  Json bounds = {{"tensor_seconds", six_digits(m.tensor_seconds)},
                 {"simt_seconds", six_digits(m.simt_seconds)},
                 {"epilogue_tensor_seconds", six_digits(m.epilogue_tensor_seconds)},
                 {"memory_seconds", six_digits(m.memory_seconds)},
                 {"issue_seconds", six_digits(m.issue_seconds)},
                 {"latency_seconds", six_digits(m.latency_seconds)},
                 {"shared_seconds", six_digits(m.shared_seconds)},
                 {"launch_seconds", six_digits(m.launch_seconds)}};
  Json phases = Json::array();
  for (const PhaseModel& p : m.phases) {
    Json figures = Json::object();
    for (const auto& [what, seconds] : p.figures) figures[what + "_seconds"] = six_digits(seconds);
    phases.push_back({{"name", p.name},
                      {"seconds", six_digits(p.seconds)},
                      {"limiter", p.limiter},
                      {"figures", std::move(figures)},
                      {"instructions_per_warp", p.instructions_per_warp},
                      {"iterations_per_warp", six_digits(p.iterations_per_warp)},
                      {"serial_loads",
                       {{"staging_rounds", p.serial.staging_rounds},
                        {"direct_rounds", p.serial.direct_rounds},
                        {"shared_rounds", p.serial.shared_rounds},
                        {"barriers", p.serial.barriers}}},
                      {"loops_counted_once", p.rolled_loops}});
  }
  Json loops = Json::array();
  for (const LoopModel& l : m.loops)
    loops.push_back({{"kind", l.kind},
                     {"address", l.address},
                     {"iterations_per_warp", six_digits(l.iterations_per_warp)},
                     {"instructions", l.instructions},
                     {"inner_loops", l.inner_loops},
                     {"serial_loads",
                      {{"staging_rounds", l.serial.staging_rounds},
                       {"direct_rounds", l.serial.direct_rounds},
                       {"shared_rounds", l.serial.shared_rounds},
                       {"barriers", l.serial.barriers}}}});
  return {{"name", kl.name},
          {"summary", kl.summary},
          {"launched", e.launched},
          {"nodes", kl.nodes},
          {"flops", whole(e.flops)},
          {"tensor_flops", whole(e.tensor_flops)},
          {"bytes", whole(e.bytes)},
          {"intensity", six_digits(e.intensity())},
          {"threads_per_cta", kl.block[0] * kl.block[1] * kl.block[2]},
          {"registers", m.registers >= 0 ? Json(m.registers) : Json(nullptr)},
          {"shared_bytes_per_cta", m.shared_bytes},
          {"ctas", whole(m.ctas)},
          {"ctas_per_sm", m.ctas_per_sm},
          {"occupancy_limit", m.occupancy_limit},
          {"waves", whole(m.waves)},
          {"instructions_per_mma", six_digits(m.instructions_per_mma)},
          {"instructions_per_m16n8k16", six_digits(m.instructions_per_m16n8k16)},
          {"tensor_fraction", six_digits(m.tensor_fraction)},
          {"tensor_fraction_why", m.tensor_fraction_why},
          {"main_loop_inner_loops",
           m.instructions_per_mma ? Json(m.main_loop_inner_loops) : Json(nullptr)},
          {"bounds", std::move(bounds)},
          {"loops", std::move(loops)},
          {"phases", std::move(phases)},
          {"overlapped_seconds", six_digits(m.overlapped_seconds)},
          {"phased_seconds", six_digits(m.phased_seconds)},
          {"limiter", m.limiter},
          {"underfills_gpu", m.underfills_gpu},
          {"estimated_seconds", six_digits(m.estimated_seconds)},
          {"roofline_seconds", six_digits(m.roofline_seconds)},
          {"bound", e.memory_bound() ? "memory" : "compute"},
          {"missing", m.missing}};
}

Json eager_json(const EagerEstimate& eager) {
  return {{"kind", "eager"},
          {"estimate", kEagerNote},
          {"estimated_seconds", six_digits(eager.seconds)},
          {"calls", eager.calls},
          {"kernels", eager.kernels},
          {"host_seconds", six_digits(eager.host_seconds)},
          {"device_seconds", six_digits(eager.device_seconds)},
          {"gemm_seconds", six_digits(eager.gemm_seconds)},
          {"dispatch_seconds_per_call", six_digits(kEagerDispatchSeconds)}};
}

}  // namespace

void print_plan_json(const PlanReport& r, std::ostream& out) {
  const CompileFlags& f = *r.flags;
  const GpuSpec& gpu = r.gpu;
  const PlanEstimate& p = r.roofline;
  Json j = {{"file", f.file},
            {"estimate", kEstimateNote},
            {"gpu",
             {{"name", gpu.name},
              {"tensor_flops_per_s", whole(gpu.tensor_flops)},
              {"simt_flops_per_s", whole(gpu.simt_flops)},
              {"bytes_per_s", whole(gpu.bytes_per_second)},
              {"sms", gpu.sms},
              {"clock_hz", whole(gpu.clock_hz)}}},
            {"model",
             {{"arch", r.arch},
              {"cuobjdump", r.cuobjdump.empty() ? Json(nullptr) : Json(r.cuobjdump)},
              {"sass", r.sass},
              {"launch_seconds", six_digits(kLaunchSeconds)},
              {"missing", r.missing}}},
            {"bindings", Json::object()},
            {"disabled_passes", f.disabled_passes}};
  for (const auto& [k, v] : f.bindings) j["bindings"][k] = v;
  Json& kernels = j["kernels"] = Json::array();
  for (size_t k = 0; k < p.kernels.size(); ++k)
    kernels.push_back(kernel_json(p.kernels[k], r.models[k]));
  j["total"] = {{"launches", p.launches},
                {"flops", whole(p.flops)},
                {"tensor_flops", whole(p.tensor_flops)},
                {"bytes", whole(p.bytes)},
                {"intensity", six_digits(p.intensity())},
                {"estimated_seconds", six_digits(r.estimated_seconds)},
                {"roofline_seconds", six_digits(p.seconds)},
                {"underfilled_kernels", underfilled(r)}};
  if (r.eager) {
    j["baseline"] = eager_json(*r.eager);
    j["ratio"] = six_digits(r.estimated_seconds / r.eager->seconds);
  }
  j["workspace_bytes"] = whole(p.workspace_bytes);
  if (r.per_value > 0) {
    j["workspace_bytes_per_token"] =
        six_digits(p.workspace_bytes / static_cast<double>(r.per_value));
    j["per_token_symbol"] = r.per_symbol;
  }
  out << json_text(j) << "\n";
}

}  // namespace dg
