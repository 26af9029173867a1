// `dyngen plan --explain`: for each launched kernel, how the model reached its estimate -- the
// occupancy and waves, the tensor-core fraction and why, each phase's figures (Note [Phases in
// series]), the overlapped bounds (Note [Achievable estimate]) and which of them sets the total.
#include <cstdio>

#include "frontends/cli/plan_output.h"

namespace dg {

namespace {

std::string us(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", seconds * 1e6);
  return buf;
}

std::string serial_text(const SerialLoads& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%d staging, %d direct, %d shared load waits, %d barriers",
                s.staging_rounds, s.direct_rounds, s.shared_rounds, s.barriers);
  return buf;
}

void explain_phase(const PhaseModel& p, std::ostream& out) {
  out << "    " << p.name << ": " << us(p.seconds) << " (" << p.limiter << ") from";
  for (const auto& [what, seconds] : p.figures) out << " " << what << " " << us(seconds) << ",";
  out << "\n      per warp: " << p.instructions_per_warp << " instructions";
  if (p.iterations_per_warp > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " an iteration, %.1f iterations", p.iterations_per_warp);
    out << buf;
  }
  out << "; " << serial_text(p.serial) << (p.iterations_per_warp > 0 ? " an iteration" : "");
  if (p.rolled_loops > 0) out << "; " << p.rolled_loops << " loop(s) counted once: a lower bound";
  out << "\n";
}

}  // namespace

void print_plan_explanation(const PlanReport& r, std::ostream& out) {
  out << "\nexplanation (Note [Achievable estimate], Note [Phases in series]):\n";
  for (size_t k = 0; k < r.models.size(); ++k) {
    const KernelEstimate& e = r.roofline.kernels[k];
    const KernelModel& m = r.models[k];
    if (!e.launched) continue;
    char line[256];
    std::snprintf(line, sizeof line, "%s: %.0f CTAs of %d warps, %d per SM (%s), %.0f wave(s); ",
                  e.kernel->name.c_str(), m.ctas, m.warps_per_cta, m.ctas_per_sm,
                  m.occupancy_limit.c_str(), m.waves);
    out << line;
    if (e.tensor_flops > 0) {
      std::snprintf(line, sizeof line, "tensor cores at %.2f of the peak (%s)\n", m.tensor_fraction,
                    m.tensor_fraction_why.c_str());
      out << line;
    } else {
      out << "no tensor-core work\n";
    }
    for (const LoopModel& l : m.loops) {
      std::snprintf(
          line, sizeof line, "    %s at 0x%llx: %.1f iterations per warp of %d instructions; ",
          l.kind.c_str(), static_cast<long long>(l.address), l.iterations_per_warp, l.instructions);
      out << line << serial_text(l.serial) << " an iteration";
      if (l.inner_loops > 0) out << "; " << l.inner_loops << " inner loop(s) counted once";
      out << "\n";
    }
    for (const PhaseModel& p : m.phases) explain_phase(p, out);
    out << "    bounds overlapped: tensor+simt "
        << us(m.tensor_seconds + m.epilogue_tensor_seconds + m.simt_seconds) << ", memory "
        << us(m.memory_seconds);
    if (m.issue_seconds) out << ", issue " << us(*m.issue_seconds);
    if (m.shared_seconds) out << ", shared " << us(*m.shared_seconds);
    if (m.latency_seconds) out << ", latency " << us(*m.latency_seconds);
    out << " -> " << us(m.overlapped_seconds) << "\n";
    if (m.phased_seconds) {
      double serial = 0;
      for (const PhaseModel& p : m.phases) serial += p.seconds;
      out << "    phases in series " << us(serial) << " with " << m.ctas_per_sm
          << " CTA(s) per SM -> " << us(*m.phased_seconds) << "\n";
    }
    out << "    estimate = launch " << us(m.launch_seconds) << " + "
        << us(m.estimated_seconds - m.launch_seconds) << " = " << us(m.estimated_seconds)
        << ", set by " << m.limiter
        << (m.estimated_seconds - m.launch_seconds <= m.roofline_seconds ? " (the roofline bound)"
                                                                         : "")
        << "\n";
    for (const std::string& missing : m.missing) out << "    not filled: " << missing << "\n";
  }
}

}  // namespace dg
