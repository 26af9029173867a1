#include "passes/pipeline.h"

#include <stdexcept>

#include "ir/verifier.h"
#include "passes/passes.h"

namespace dg {

namespace {
struct PassEntry {
  const char* name;
  Graph (*run)(const Graph&);
  const char* why_here;
};

constexpr PassEntry kPipeline[] = {
    {"cse", eliminate_common_subexpressions,
     "first: PEFT casts x to f32 once per adapter; merged casts expose round trips to fold_casts"},
    {"fold_casts", fold_casts, "after cse, so each distinct cast chain is looked at once"},
    {"fold_permutes", fold_permutes, "with the other folds, before dce removes what they leave"},
    {"dce", eliminate_dead_code, "removes what cse and fold_casts left unused, before fusion"},
    {"split_weight_grads", split_weight_grads,
     "after cse, fold_casts and dce, so each gradient's prologue chain is minimal and shared"},
    {"hoist_gemm_scale", hoist_gemm_scale,
     "after split_weight_grads, which keeps the scaled gradient as its prologue; before fusion, "
     "so the scale joins the GEMM's epilogue and the cast its prologue"},
    {"concat_gemm_k", concat_gemm_k,
     "before fusion, so the concatenated GEMM is the anchor its epilogue terms join"},
    {"fuse_lora_linear", fuse_lora_linear,
     "after cse and fold_casts, so each adapter's x.to(f32) is one node and the chain is plain"},
    {"fuse_gate_up", fuse_gate_up,
     "after fuse_lora_linear: merges whole LoRA linears (and their rank-r products) pairwise"},
    {"fuse_operand_views", fuse_operand_views,
     "after the GEMM groups exist, before fuse_pointwise claims nodes for pointwise kernels"},
    {"fuse_pointwise", fuse_pointwise,
     "elementwise leftovers join the GEMM groups (epilogue / prologue) or form their own"},
    {"fuse_concat_operands", fuse_concat_operands,
     "after fuse_pointwise, so a concatenated GEMM's epilogue group exists"},
    {"fuse_epilogue_producers", fuse_epilogue_producers,
     "after fuse_pointwise, once every group and its readers are known"},
    {"group_independent_gemms", group_independent_gemms,
     "last: groups whole GEMM kernels, so every group's prologue and epilogue is final"},
};
}  // namespace

Graph run_pass(const std::string& name, const Graph& g) {
  for (const PassEntry& p : kPipeline)
    if (name == p.name) return p.run(g);
  throw std::invalid_argument("unknown pass " + name);
}

std::vector<std::string> pipeline_pass_names() {
  std::vector<std::string> names;
  for (const PassEntry& p : kPipeline) names.push_back(p.name);
  return names;
}

Graph run_pipeline(const Graph& g, const PipelineOptions& options) {
  Graph current = g;
  if (options.after_pass) options.after_pass("input", current);
  for (const PassEntry& p : kPipeline) {
    if (options.disabled.count(p.name)) continue;
    current = p.run(current);
    if (options.verify_each) {
      std::string err = verify_graph(current);
      if (!err.empty())
        throw std::logic_error(std::string("pass ") + p.name + " broke the graph: " + err);
    }
    if (options.after_pass) options.after_pass(p.name, current);
  }
  return current;
}

}  // namespace dg
