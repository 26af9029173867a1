#include "runtime/executable_json.h"

#include "runtime/json_escape.h"

namespace dg {

namespace {

std::string resources_json(const std::vector<KernelResources>& all, const std::string& kernel) {
  for (const KernelResources& r : all) {
    if (r.name != kernel) continue;
    return "{\"arch\": " + json_escape(r.arch) + ", \"registers\": " + std::to_string(r.registers) +
           ", \"spill_store_bytes\": " + std::to_string(r.spill_store_bytes) +
           ", \"spill_load_bytes\": " + std::to_string(r.spill_load_bytes) +
           ", \"stack_frame_bytes\": " + std::to_string(r.stack_frame_bytes) +
           ", \"shared_bytes\": " + std::to_string(r.shared_bytes) +
           ", \"barriers\": " + std::to_string(r.barriers) + "}";
  }
  return "null";
}

}  // namespace

std::string describe_executable_json(const Executable& e, const std::string& key, int cache_hit,
                                     const std::vector<KernelResources>* resources) {
  const KernelPlan& plan = e.plan();
  std::string j = "{\"key\": " + json_escape(key) + ", \"target\": " + json_escape(e.target()) +
                  ", \"cache_hit\": " + (cache_hit ? "true" : "false") + ", \"cache_tier\": " +
                  json_escape(cache_hit == 1   ? "memory"
                              : cache_hit == 2 ? "disk"
                                               : "none") +
                  ", \"symbols\": [";
  for (size_t i = 0; i < plan.symbols.size(); ++i)
    j += (i ? ", " : "") + json_escape(plan.symbols[i].symbol_name());
  SymExpr total_flops(0), total_tensor_flops(0), total_bytes(0);
  for (const KernelLaunch& kl : plan.kernels) {
    total_flops = total_flops + kl.flops;
    total_tensor_flops = total_tensor_flops + kl.tensor_flops;
    total_bytes = total_bytes + kl.bytes;
  }
  j += "], \"workspace_bytes\": " + json_escape(plan.workspace_bytes.to_string()) +
       ", \"total_flops\": " + json_escape(total_flops.to_string()) +
       ", \"total_tensor_flops\": " + json_escape(total_tensor_flops.to_string()) +
       ", \"total_bytes\": " + json_escape(total_bytes.to_string()) + ", \"kernels\": [";
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const KernelLaunch& kl = plan.kernels[k];
    j += std::string(k ? ", " : "") + "{\"name\": " + json_escape(kl.name) +
         ", \"summary\": " + json_escape(kl.summary) + ", \"grid\": [";
    for (int d = 0; d < 3; ++d) j += (d ? ", " : "") + json_escape(kl.grid[d].to_string());
    j += "], \"block\": [" + std::to_string(kl.block[0]) + ", " + std::to_string(kl.block[1]) +
         ", " + std::to_string(kl.block[2]) + "], \"nodes\": [";
    for (size_t n = 0; n < kl.nodes.size(); ++n) j += (n ? ", " : "") + std::to_string(kl.nodes[n]);
    j += "], \"ops\": [";
    for (size_t n = 0; n < kl.nodes.size(); ++n) {
      const Node& node = e.graph().nodes.at(kl.nodes[n]);
      j += (n ? ", " : "") + json_escape(std::string(op_name(node.op)));
    }
    j += "], \"flops\": " + json_escape(kl.flops.to_string()) +
         ", \"tensor_flops\": " + json_escape(kl.tensor_flops.to_string()) +
         ", \"bytes\": " + json_escape(kl.bytes.to_string());
    if (resources) j += ", \"ptxas\": " + resources_json(*resources, kl.name);
    j += "}";
  }
  return j + "]}";
}

}  // namespace dg
