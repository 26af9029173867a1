#include "runtime/executable_json.h"

#include "runtime/json_escape.h"

namespace dg {

std::string describe_executable_json(const Executable& e, const std::string& key, int cache_hit) {
  const KernelPlan& plan = e.plan();
  std::string j = "{\"key\": " + json_escape(key) + ", \"target\": " + json_escape(e.target()) +
                  ", \"cache_hit\": " + (cache_hit ? "true" : "false") + ", \"cache_tier\": " +
                  json_escape(cache_hit == 1   ? "memory"
                              : cache_hit == 2 ? "disk"
                                               : "none") +
                  ", \"symbols\": [";
  for (size_t i = 0; i < plan.symbols.size(); ++i)
    j += (i ? ", " : "") + json_escape(plan.symbols[i].symbol_name());
  j += "], \"workspace_bytes\": " + json_escape(plan.workspace_bytes.to_string()) +
       ", \"kernels\": [";
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const KernelLaunch& kl = plan.kernels[k];
    j += std::string(k ? ", " : "") + "{\"name\": " + json_escape(kl.name) +
         ", \"summary\": " + json_escape(kl.summary) + ", \"grid\": [";
    for (int d = 0; d < 3; ++d) j += (d ? ", " : "") + json_escape(kl.grid[d].to_string());
    j += "], \"block\": [" + std::to_string(kl.block[0]) + ", " + std::to_string(kl.block[1]) +
         ", " + std::to_string(kl.block[2]) + "]}";
  }
  return j + "]}";
}

}  // namespace dg
