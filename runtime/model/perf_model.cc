#include "runtime/model/perf_model.h"

#include <algorithm>
#include <cmath>

#include "runtime/model/occupancy.h"
#include "runtime/model/sass_operands.h"

namespace dg {

namespace {

// Clocks of one round of waits (Note [Serial loads]); `dram_share` is the share of staged loads
// that come from DRAM, the rest from L2. Direct global loads hit L1 inside a loop and L2 in
// straight code (Note [Achievable estimate]).
double wait_clocks(const SerialLoads& w, double dram_share, bool in_loop, const GpuSpec& gpu) {
  double staging = dram_share * gpu.dram_latency_clocks + (1 - dram_share) * gpu.l2_latency_clocks;
  double direct = in_loop ? gpu.l1_latency_clocks : gpu.l2_latency_clocks;
  return w.instructions + w.barriers * gpu.barrier_clocks + w.staging_rounds * staging +
         w.direct_rounds * direct + w.shared_rounds * gpu.l1_latency_clocks;
}

// A loop the model counts by its iterations (per warp), and where it lies.
struct CountedLoop {
  const SassLoop* loop;
  double iterations;
  bool main;
};

std::vector<CountedLoop> counted_loops(const SassStats& s, const KernelEstimate& e,
                                       double simt_contraction_flops, int warps) {
  std::vector<CountedLoop> loops;
  if (s.main_mma_loop >= 0 && e.tensor_flops > 0) {
    const SassLoop& l = s.loops[s.main_mma_loop];
    // The kernel's tensor FLOPs over every warp's per-iteration MMA FLOPs.
    loops.push_back({&l, e.tensor_flops * e.mma_terms / (l.mma_flops * warps * e.ctas), true});
  }
  if (!s.simt_loops.empty() && simt_contraction_flops > 0) {
    double ffma = 0;
    for (int k : s.simt_loops) ffma += s.loops[k].ffma;
    // The loops share the FFMAs (2 FLOPs a lane): each runs as many iterations as the others.
    double iterations = simt_contraction_flops / (2.0 * 32 * ffma * warps * e.ctas);
    for (int k : s.simt_loops) loops.push_back({&s.loops[k], iterations, false});
  }
  return loops;
}

// Warps that run the main MMA loop and the epilogue: all of them, but in a warp-specialized sm_90a
// GEMM (HGMMA fed by TMA) whose last warpgroup is the producer (Note [Warp-specialized main loop]
// in codegen/device/dg_gemm_sm90.cuh): it copies, and neither multiplies nor stores.
int mma_warps(const SassStats* s, int warps) {
  if (!s || warps <= 4) return warps;
  bool hgmma = false, tma = false;
  for (const SassInstruction& i : s->instructions) {
    hgmma = hgmma || sass_base(i.opcode) == "HGMMA";
    tma = tma || sass_base(i.opcode) == "UTMALDG";
  }
  return hgmma && tma ? warps - 4 : warps;
}

// The share of the SM's dense tensor peak the kernel's MMAs reach (Note [Tensor-core ceiling]).
double tensor_fraction(const SassStats* sass, double resident, int warps, const GpuSpec& gpu,
                       std::string* why) {
  bool hgmma = false;
  if (sass)
    for (const SassInstruction& i : sass->instructions)
      if (sass_base(i.opcode) == "HGMMA") hgmma = true;
  double path = sass && !hgmma ? gpu.mma_sync_fraction : 1.0;
  double fraction = std::min(path, gpu.tensor_ceiling);
  *why = !sass ? "no SASS: the ceiling" : hgmma ? "wgmma at the ceiling" : "mma.sync";
  double units = std::min(1.0, resident * warps / gpu.schedulers_per_sm);
  if (units < 1) *why += ", " + std::to_string(static_cast<int>(resident * warps)) + " of 4 units";
  return fraction * units;
}

PhaseModel phase(const char* name, std::vector<std::pair<std::string, double>> figures) {
  PhaseModel p;
  p.name = name;
  p.figures = std::move(figures);
  for (const auto& [what, seconds] : p.figures)
    if (seconds > p.seconds || p.limiter.empty()) {
      p.seconds = seconds;
      p.limiter = what;
    }
  return p;
}

}  // namespace

KernelModel model_kernel(const KernelModelInput& in, const GpuSpec& gpu) {
  KernelModel m;
  const KernelEstimate& e = *in.roofline;
  m.roofline_seconds = e.seconds();
  m.ctas = e.ctas;
  m.registers = in.resources ? in.resources->registers : -1;
  int64_t static_shared = in.resources ? in.resources->shared_bytes : 0;
  m.shared_bytes = static_shared + in.dynamic_shared_bytes;
  Occupancy occ = occupancy(gpu, in.threads_per_block, m.registers, m.shared_bytes);
  m.ctas_per_sm = occ.blocks_per_sm;
  m.warps_per_cta = occ.warps_per_block;
  m.occupancy_limit = occ.limit;
  if (!in.resources)
    m.missing.push_back(
        "ctas_per_sm: no ptxas report, so registers and static "
        "shared memory are not counted");
  const SassStats* sass = in.sass;
  const bool main_loop = sass && sass->main_mma_loop >= 0 && e.tensor_flops > 0;
  if (main_loop) {
    const SassLoop& l = sass->loops[sass->main_mma_loop];
    m.instructions_per_mma = l.mma > 0 ? static_cast<double>(l.instructions) / l.mma : 0;
    m.instructions_per_m16n8k16 = sass->instructions_per_m16n8k16();
    m.main_loop_inner_loops = l.inner_loops;
  }
  if (!sass) {
    std::string why = ": no SASS (" + in.no_sass_reason + ")";
    for (const char* f : {"issue_seconds", "latency_seconds", "shared_seconds", "phases"})
      m.missing.push_back(f + why);
    if (e.tensor_flops > 0) m.missing.push_back("instructions_per_mma" + why);
  }
  if (!e.launched || m.ctas <= 0) {
    m.limiter = "not launched";
    return m;
  }
  m.underfills_gpu = e.flops > kUnderfillFlops && m.ctas < gpu.sms;
  if (m.ctas_per_sm <= 0) {
    m.limiter = "does not fit an SM";
    m.missing.push_back("estimated_seconds: the block needs more than an SM has (" + occ.limit +
                        ")");
    m.estimated_seconds = m.roofline_seconds;
    return m;
  }
  const int warps = m.warps_per_cta, workers = mma_warps(sass, warps);
  m.waves = std::ceil(m.ctas / (static_cast<double>(gpu.sms) * m.ctas_per_sm));
  const double resident = std::min<double>(m.ctas_per_sm, std::ceil(m.ctas / gpu.sms));
  const double busiest = m.waves * resident;  // blocks the busiest SM runs, one wave after another
  m.tensor_fraction = tensor_fraction(sass, resident, workers, gpu, &m.tensor_fraction_why);
  if (e.tensor_flops <= 0) m.tensor_fraction_why = "no tensor-core work";
  const double sm_tensor = gpu.tensor_flops / gpu.sms * m.tensor_fraction;
  m.tensor_seconds =
      e.tensor_flops > 0 ? busiest * (e.tensor_flops * e.mma_terms / m.ctas) / sm_tensor : 0;
  m.simt_seconds = busiest * ((e.flops - e.tensor_flops - e.epilogue_mma_flops) / m.ctas) /
                   (gpu.simt_flops / gpu.sms);
  // Note [Epilogue MMAs]: at the main loop's rate, after it.
  m.epilogue_tensor_seconds =
      busiest * (e.epilogue_mma_flops * e.epilogue_mma_terms / m.ctas) / sm_tensor;
  m.memory_seconds = e.memory_seconds;
  struct Bound {
    double seconds;
    std::string name;
  };
  std::vector<Bound> bounds = {{m.tensor_seconds + m.epilogue_tensor_seconds + m.simt_seconds,
                                e.tensor_flops > 0 ? "tensor" : "simt"},
                               {m.memory_seconds, "memory"}};
  if (sass) {
    const double issuers = std::min<double>(gpu.schedulers_per_sm, resident * warps);
    // Warp-instructions per block: the prologue's all warps run, the rest the MMA warps.
    auto issue_time = [&](double instructions_per_warp, int by) {
      return busiest * instructions_per_warp * by / (issuers * gpu.clock_hz);
    };
    std::vector<CountedLoop> loops = counted_loops(*sass, e, in.simt_contraction_flops, workers);
    std::vector<bool> counted(sass->instructions.size(), false);
    double staged = 0;  // bytes the loops stage into shared memory, all threads together
    for (const CountedLoop& c : loops) {
      staged += c.iterations * (c.loop->global_load_bytes + c.loop->async_copy_bytes) *
                in.threads_per_block * m.ctas;
      for (int j = c.loop->begin; j <= c.loop->end; ++j) counted[j] = true;
    }
    // Compulsory bytes come from DRAM once; a tile staged again (by another CTA) comes from L2.
    const double dram_share = staged > 0 ? std::min(1.0, e.bytes / staged) : 1.0;
    SassPhase before, after;
    split_at_main_loop(*sass, counted, &before, &after);
    // Per warp: instructions and serial clocks, before / inside / after the main loop.
    double instructions[3] = {double(before.instructions), 0, double(after.instructions)};
    double clocks[3] = {wait_clocks(before.serial, dram_share, false, gpu), 0,
                        wait_clocks(after.serial, dram_share, false, gpu)};
    double shared_bytes = 0;  // per warp, the main loop's
    for (const CountedLoop& c : loops) {
      m.loops.push_back({c.main ? "main MMA loop" : "SIMT loop",
                         sass->instructions[c.loop->begin].address, c.iterations,
                         c.loop->instructions, c.loop->inner_loops,
                         loop_serial_loads(*sass, *c.loop)});
      int at = c.main ? 1 : main_loop && c.loop->end > sass->loops[sass->main_mma_loop].end ? 2 : 0;
      instructions[at] += c.iterations * c.loop->instructions;
      clocks[at] +=
          c.iterations * wait_clocks(loop_serial_loads(*sass, *c.loop), dram_share, true, gpu);
      if (c.main) shared_bytes += c.iterations * shared_bytes_per_iteration(*sass, *c.loop);
    }
    const double staging_latency =
        dram_share * gpu.dram_latency_clocks + (1 - dram_share) * gpu.l2_latency_clocks;
    if (main_loop) clocks[1] += staging_latency;  // filling the pipeline (Note [Phases in series])
    m.issue_seconds =
        issue_time(instructions[0], warps) + issue_time(instructions[1] + instructions[2], workers);
    m.latency_seconds = m.waves * (clocks[0] + clocks[1] + clocks[2]) / gpu.clock_hz;
    m.shared_seconds = busiest * shared_bytes * warps / (gpu.shared_bytes_per_clock * gpu.clock_hz);
    bounds.push_back({*m.issue_seconds, "issue"});
    bounds.push_back({*m.latency_seconds, "latency"});
    bounds.push_back({*m.shared_seconds, "shared"});
    if (main_loop) {
      const SassLoop& l = sass->loops[sass->main_mma_loop];
      auto latency = [&](int at) { return m.waves * clocks[at] / gpu.clock_hz; };
      m.phases.push_back(phase(
          "prologue", {{"issue", issue_time(instructions[0], warps)}, {"latency", latency(0)}}));
      m.phases.back().instructions_per_warp = before.instructions;
      m.phases.back().serial = before.serial;
      m.phases.back().rolled_loops = before.rolled_loops;
      m.phases.push_back(phase("main loop", {{"tensor", m.tensor_seconds},
                                             {"issue", issue_time(instructions[1], workers)},
                                             {"shared", *m.shared_seconds},
                                             {"memory", m.memory_seconds},
                                             {"latency", latency(1)}}));
      m.phases.back().instructions_per_warp = l.instructions;
      m.phases.back().iterations_per_warp = loops.front().iterations;
      m.phases.back().serial = loop_serial_loads(*sass, l);
      m.phases.push_back(phase("epilogue", {{"issue", issue_time(instructions[2], workers)},
                                            {"latency", latency(2)},
                                            {"simt", m.simt_seconds},
                                            {"tensor", m.epilogue_tensor_seconds}}));
      m.phases.back().instructions_per_warp = after.instructions;
      m.phases.back().serial = after.serial;
      m.phases.back().rolled_loops = after.rolled_loops;
    }
  }
  const Bound* top = &bounds[0];
  for (const Bound& b : bounds)
    if (b.seconds > top->seconds) top = &b;
  m.overlapped_seconds = top->seconds;
  m.limiter = top->name;
  double body = top->seconds;
  if (!m.phases.empty()) {
    double serial = 0;
    for (const PhaseModel& p : m.phases) serial += p.seconds;
    m.phased_seconds =
        m.overlapped_seconds + std::max(0.0, serial - m.overlapped_seconds) / resident;
    if (*m.phased_seconds > body) {
      body = *m.phased_seconds;
      m.limiter = "phases";
    }
  }
  m.launch_seconds = kLaunchSeconds;
  m.estimated_seconds = m.launch_seconds + std::max(body, m.roofline_seconds);
  return m;
}

}  // namespace dg
