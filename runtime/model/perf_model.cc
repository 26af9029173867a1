#include "runtime/model/perf_model.h"

#include <algorithm>
#include <cmath>

#include "runtime/model/occupancy.h"

namespace dg {

namespace {

// Dynamic warp-instructions per block and one warp's serial loop time in clocks, from the SASS
// (Note [Achievable estimate]).
struct SassWork {
  double instructions_per_block = 0;
  double serial_clocks = 0;
  double dram_share = 1;  // of the loops' staged global loads
};

// One warp's clocks for an iteration of `l`; `dram_share` is the share of staged loads that come
// from DRAM, the rest from L2 (Note [Achievable estimate]).
double iteration_clocks(const SassLoop& l, double dram_share, const GpuSpec& gpu) {
  double clocks = l.instructions + l.barriers * gpu.barrier_clocks;
  if (l.exposed_staging_load)
    clocks += dram_share * gpu.dram_latency_clocks + (1 - dram_share) * gpu.l2_latency_clocks;
  if (l.exposed_global_load) clocks += gpu.l1_latency_clocks;
  if (l.exposed_shared_load) clocks += gpu.l1_latency_clocks;
  return clocks;
}

SassWork sass_work(const SassStats& s, const KernelEstimate& e, double simt_contraction_flops,
                   int threads, int warps, const GpuSpec& gpu) {
  SassWork w;
  double ctas = e.ctas;
  // The loops that carry the work, with their iterations per warp.
  std::vector<std::pair<const SassLoop*, double>> loops;
  if (s.main_mma_loop >= 0 && e.tensor_flops > 0) {
    const SassLoop& l = s.loops[s.main_mma_loop];
    // The kernel's tensor FLOPs over every warp's per-iteration MMA FLOPs.
    loops.push_back({&l, e.tensor_flops / (l.mma_flops * warps * ctas)});
  }
  if (!s.simt_loops.empty() && simt_contraction_flops > 0) {
    double ffma = 0;
    for (int k : s.simt_loops) ffma += s.loops[k].ffma;
    // The loops share the FFMAs (2 FLOPs a lane): each runs as many iterations as the others.
    double iterations = simt_contraction_flops / (2.0 * 32 * ffma * warps * ctas);
    for (int k : s.simt_loops) loops.push_back({&s.loops[k], iterations});
  }
  std::vector<bool> counted(s.instructions.size(), false);
  double staged = 0;  // bytes the loops stage into shared memory, all threads together
  for (const auto& [l, iterations] : loops) {
    staged += iterations * (l->global_load_bytes + l->async_copy_bytes) * threads * ctas;
    for (int j = l->begin; j <= l->end; ++j) counted[j] = true;
  }
  // Compulsory bytes come from DRAM once; a tile staged again (by another CTA) comes from L2.
  w.dram_share = staged > 0 ? std::min(1.0, e.bytes / staged) : 1.0;
  for (const auto& [l, iterations] : loops) {
    w.instructions_per_block += iterations * l->instructions * warps;
    w.serial_clocks += iterations * iteration_clocks(*l, w.dram_share, gpu);
  }
  // The rest runs once per warp, one side of each branch (Note [Longest path]).
  w.instructions_per_block += s.longest_path(counted) * warps;
  return w;
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
  if (in.sass && in.sass->main_mma_loop >= 0 && e.tensor_flops > 0) {
    m.instructions_per_mma = in.sass->instructions_per_mma();
    m.main_loop_inner_loops = in.sass->loops[in.sass->main_mma_loop].inner_loops;
  }
  if (!in.sass) {
    std::string why = ": no SASS (" + in.no_sass_reason + ")";
    m.missing.push_back("issue_seconds" + why);
    m.missing.push_back("latency_seconds" + why);
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
  m.waves = std::ceil(m.ctas / (static_cast<double>(gpu.sms) * m.ctas_per_sm));
  double resident = std::min<double>(m.ctas_per_sm, std::ceil(m.ctas / gpu.sms));
  double busiest = m.waves * resident;  // blocks the busiest SM runs, one wave after another
  bool hgmma = false;
  if (in.sass)
    for (const SassInstruction& i : in.sass->instructions)
      if (i.opcode.rfind("HGMMA", 0) == 0) hgmma = true;
  double tensor_rate = gpu.tensor_flops / gpu.sms;
  if (in.sass && !hgmma) tensor_rate *= gpu.mma_sync_fraction;
  m.tensor_seconds = busiest * (e.tensor_flops / m.ctas) / tensor_rate;
  m.simt_seconds = busiest * ((e.flops - e.tensor_flops) / m.ctas) / (gpu.simt_flops / gpu.sms);
  m.memory_seconds = e.memory_seconds;
  struct Bound {
    double seconds;
    const char* name;
  };
  std::vector<Bound> bounds = {
      {m.tensor_seconds + m.simt_seconds, e.tensor_flops > 0 ? "tensor" : "simt"},
      {m.memory_seconds, "memory"}};
  if (in.sass) {
    SassWork w = sass_work(*in.sass, e, in.simt_contraction_flops, in.threads_per_block,
                           m.warps_per_cta, gpu);
    double issuers = std::min<double>(gpu.schedulers_per_sm, resident * m.warps_per_cta);
    m.issue_seconds = busiest * w.instructions_per_block / (issuers * gpu.clock_hz);
    m.latency_seconds = m.waves * w.serial_clocks / gpu.clock_hz;
    bounds.push_back({*m.issue_seconds, "issue"});
    bounds.push_back({*m.latency_seconds, "latency"});
  }
  const Bound* top = &bounds[0];
  for (const Bound& b : bounds)
    if (b.seconds > top->seconds) top = &b;
  m.limiter = top->name;
  m.launch_seconds = kLaunchSeconds;
  m.estimated_seconds = m.launch_seconds + std::max(top->seconds, m.roofline_seconds);
  return m;
}

}  // namespace dg
