#include "runtime/executable_json.h"

namespace dg {

namespace {

Json resources_json(const std::vector<KernelResources>& all, const std::string& kernel) {
  for (const KernelResources& r : all) {
    if (r.name != kernel) continue;
    return {{"arch", r.arch},
            {"registers", r.registers},
            {"spill_store_bytes", r.spill_store_bytes},
            {"spill_load_bytes", r.spill_load_bytes},
            {"stack_frame_bytes", r.stack_frame_bytes},
            {"shared_bytes", r.shared_bytes},
            {"barriers", r.barriers}};
  }
  return nullptr;
}

Json kernel_json(const Executable& e, const KernelLaunch& kl,
                 const std::vector<KernelResources>* resources) {
  Json ops = Json::array();
  for (int n : kl.nodes) ops.push_back(std::string(op_name(e.graph().nodes.at(n).op)));
  Json k = {{"name", kl.name},
            {"summary", kl.summary},
            {"grid", {kl.grid[0].to_string(), kl.grid[1].to_string(), kl.grid[2].to_string()}},
            {"block", {kl.block[0], kl.block[1], kl.block[2]}},
            {"nodes", kl.nodes},
            {"ops", std::move(ops)},
            {"flops", kl.flops.to_string()},
            {"tensor_flops", kl.tensor_flops.to_string()},
            {"bytes", kl.bytes.to_string()},
            {"variant", kl.variant},
            {"runs", kl.runs.to_string()},
            // Note [GEMM fallbacks]: runs only in a call the GEMM's other kernels cannot take.
            {"fallback", kl.fallback}};
  if (resources) k["ptxas"] = resources_json(*resources, kl.name);
  return k;
}

}  // namespace

Json describe_executable_json(const Executable& e, const std::string& key, int cache_hit,
                              const std::vector<KernelResources>* resources) {
  const KernelPlan& plan = e.plan();
  Json symbols = Json::array();
  for (const auto& s : plan.symbols) symbols.push_back(s.symbol_name());
  SymExpr total_flops(0), total_tensor_flops(0), total_bytes(0);
  Json kernels = Json::array();
  for (const KernelLaunch& kl : plan.kernels) {
    kernels.push_back(kernel_json(e, kl, resources));
    if (kl.variant > 0) continue;  // a call runs one tile variant of a GEMM (Note [Tile choice])
    total_flops = total_flops + kl.flops;
    total_tensor_flops = total_tensor_flops + kl.tensor_flops;
    total_bytes = total_bytes + kl.bytes;
  }
  return {{"key", key},
          {"target", e.target()},
          {"cache_hit", cache_hit != 0},
          {"cache_tier", cache_hit == 1   ? "memory"
                         : cache_hit == 2 ? "disk"
                                          : "none"},
          {"symbols", std::move(symbols)},
          {"workspace_bytes", plan.workspace_bytes.to_string()},
          {"total_flops", total_flops.to_string()},
          {"total_tensor_flops", total_tensor_flops.to_string()},
          {"total_bytes", total_bytes.to_string()},
          {"kernels", std::move(kernels)}};
}

}  // namespace dg
