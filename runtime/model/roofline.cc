#include "runtime/model/roofline.h"

#include <cctype>

namespace dg {

namespace {

// Note [GPU facts] in roofline.h names the source of every figure.
GpuSpec gpu(const char* name, double tensor, double simt, double bandwidth, int sms, double clock,
            int64_t smem_per_sm_kb, double mma_sync_fraction) {
  GpuSpec g{name, tensor, simt, bandwidth};
  g.sms = sms;
  g.clock_hz = clock;
  g.shared_bytes_per_sm = smem_per_sm_kb * 1024;
  g.shared_bytes_per_block = (smem_per_sm_kb - 1) * 1024;  // 227 KB of 228, 163 of 164
  g.mma_sync_fraction = mma_sync_fraction;
  return g;
}

// The H200's mma.sync fraction, 2/3, is an assumption (Note [GPU facts]).
const GpuSpec kGpus[] = {gpu("H200", 989e12, 67e12, 4.8e12, 132, 1.83e9, 228, 2.0 / 3.0),
                         gpu("A100", 312e12, 19.5e12, 2.0e12, 108, 1.41e9, 164, 1.0)};

}  // namespace

std::optional<GpuSpec> find_gpu(const std::string& name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const GpuSpec& g : kGpus)
    if (g.name == upper) return g;
  return std::nullopt;
}

std::string known_gpus() {
  std::string s;
  for (const GpuSpec& g : kGpus) {
    std::string lower;
    for (char c : g.name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    s += (s.empty() ? "" : ", ") + lower;
  }
  return s;
}

std::optional<PlanEstimate> estimate_plan(const KernelPlan& plan,
                                          const std::map<std::string, int64_t>& bindings,
                                          const GpuSpec& gpu, std::string* error) {
  auto eval = [&](const SymExpr& e, const std::string& what, double* out) {
    std::optional<int64_t> v = e.evaluate(bindings);
    if (!v) {
      *error =
          "cannot evaluate " + what + " = " + e.to_string() + " (an unbound symbol or an overflow)";
      return false;
    }
    *out = static_cast<double>(*v);
    return true;
  };
  PlanEstimate p;
  if (!eval(plan.workspace_bytes, "the workspace size", &p.workspace_bytes)) return std::nullopt;
  for (const KernelLaunch& k : plan.kernels) {
    KernelEstimate e;
    e.kernel = &k;
    e.launched = true;
    e.ctas = 1;
    for (int d = 0; d < 3; ++d) {
      double extent = 0;
      if (!eval(k.grid[d], k.name + "'s grid", &extent)) return std::nullopt;
      if (extent <= 0) e.launched = false;
      e.ctas *= extent;
    }
    // Note [GEMM fallbacks]: a fallback runs only in a call the GEMM's other kernels refuse.
    if (k.fallback) e.launched = false;
    if (!e.launched) e.ctas = 0;
    if (!eval(k.flops, k.name + "'s FLOPs", &e.flops) ||
        !eval(k.tensor_flops, k.name + "'s tensor FLOPs", &e.tensor_flops) ||
        !eval(k.bytes, k.name + "'s bytes", &e.bytes) ||
        !eval(k.epilogue_mma_flops, k.name + "'s epilogue MMA FLOPs", &e.epilogue_mma_flops))
      return std::nullopt;
    if (!e.launched) e.flops = e.tensor_flops = e.bytes = e.epilogue_mma_flops = 0;
    if (k.split_terms > 0) e.mma_terms = k.split_terms;
    e.epilogue_mma_terms = k.epilogue_split_terms;
    // The roofline counts every FLOP once, on the unit that runs it.
    const double on_tensor = e.tensor_flops + e.epilogue_mma_flops;
    e.compute_seconds = on_tensor / gpu.tensor_flops + (e.flops - on_tensor) / gpu.simt_flops;
    e.memory_seconds = e.bytes / gpu.bytes_per_second;
    if (e.launched) {
      ++p.launches;
      p.flops += e.flops;
      p.tensor_flops += e.tensor_flops;
      p.bytes += e.bytes;
      p.seconds += e.seconds();
    }
    p.kernels.push_back(e);
  }
  return p;
}

}  // namespace dg
