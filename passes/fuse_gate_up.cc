// fuse_gate_up: horizontal fusion of GEMMs that read the same input (Note [Fusion groups]).
//
// 1. SwiGLU: mul(silu(gate), up) where gate and up come out of two GEMM kernels (plain GEMMs or
//    fused LoRA linears) whose GEMMs read the same A with the same N and K: one kernel with two B
//    operands, silu and mul in its epilogue. silu of a bf16 value computes in f32 and rounds to
//    bf16, the mul rounds again: each member keeps its dtype, so the rounding is PyTorch's. Values
//    used later (AOTAutograd's forward saves the gate / up pre-activations) are still stored.
// 2. GEMMs that read the same A, have the same N and K and whose results feed one fused kernel
//    (LoRA's rank-r products x.f32 @ A_gate^T and x.f32 @ A_up^T) become one GEMM with two B
//    operands.
#include "passes/fusion_util.h"
#include "passes/passes.h"

namespace dg {

namespace {

// The GEMM group producing `v` (creating a group for an ungrouped GEMM), if it has one anchor.
int64_t single_gemm_group(FusionAssignment& fa, ValueId v, int* anchor) {
  const Graph& g = fa.graph();
  int p = producer_of(g, v);
  if (p < 0) return 0;
  int64_t id = fa.group_of(p);
  if (id == 0) {
    if (op_info(g.nodes[p].op).category != OpCategory::kMatmul) return 0;
    *anchor = p;
    return -1;  // not grouped yet
  }
  std::vector<int> anchors = anchors_of(g, fa, id);
  if (anchors.size() != 1) return 0;
  *anchor = anchors[0];
  return id;
}

// Two GEMMs one kernel can run with one A tile: same op and A, same N and K and output type, no
// batch dims, no bias difference in arity.
bool compatible(const Graph& g, int a, int b) {
  const Node &x = g.nodes[a], &y = g.nodes[b];
  if (x.op != y.op || x.inputs[0] != y.inputs[0] || x.inputs.size() != y.inputs.size())
    return false;
  if (g.tensor(x.output) != g.tensor(y.output)) return false;
  if (g.tensor(x.inputs[1]).shape != g.tensor(y.inputs[1]).shape) return false;
  if (x.op == OpKind::kMatmul && g.tensor(x.inputs[0]).rank() != 2) return false;
  return g.tensor(x.inputs[1]).rank() == 2;
}

std::vector<int> join(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Merges the groups (or lone GEMMs) of anchors a and b plus `extra` if the result is convex.
bool fuse_pair(FusionAssignment& fa, int64_t ga, int a, int64_t gb, int b,
               const std::vector<int>& extra) {
  std::vector<int> ma = ga > 0 ? fa.members(ga) : std::vector<int>{a};
  std::vector<int> mb = gb > 0 ? fa.members(gb) : std::vector<int>{b};
  std::vector<int> all = join(join(ma, mb), extra);
  if (!fa.convex(all)) return false;
  int64_t id = ga > 0 ? ga : fa.create({a});
  for (int n : all) fa.add(id, n);
  return true;
}

bool fuse_swiglu(FusionAssignment& fa, int mul) {
  const Graph& g = fa.graph();
  const Node& m = g.nodes[mul];
  if (m.op != OpKind::kMul || fa.group_of(mul) != 0) return false;
  for (int side = 0; side < 2; ++side) {
    int silu = producer_of(g, m.inputs[side]);
    if (silu < 0 || g.nodes[silu].op != OpKind::kSilu || fa.group_of(silu) != 0) continue;
    int gate = -1, up = -1;
    int64_t gg = single_gemm_group(fa, g.nodes[silu].inputs[0], &gate);
    int64_t gu = single_gemm_group(fa, m.inputs[1 - side], &up);
    if (gg == 0 || gu == 0 || gate == up || (gg > 0 && gg == gu)) continue;
    if (!compatible(g, gate, up)) continue;
    if (g.tensor(m.output).shape != g.tensor(g.nodes[gate].output).shape) continue;
    if (fuse_pair(fa, gg, gate, gu, up, {silu, mul})) return true;
  }
  return false;
}

// The group every reader of `v` belongs to, or 0.
int64_t sole_reader_group(const FusionAssignment& fa, ValueId v) {
  int64_t id = 0;
  for (int u : users_of(fa.graph(), v)) {
    if (fa.group_of(u) == 0 || (id != 0 && fa.group_of(u) != id)) return 0;
    id = fa.group_of(u);
  }
  return id;
}

bool fuse_shared_input(FusionAssignment& fa) {
  const Graph& g = fa.graph();
  for (size_t a = 0; a < g.nodes.size(); ++a) {
    for (size_t b = a + 1; b < g.nodes.size(); ++b) {
      if (op_info(g.nodes[a].op).category != OpCategory::kMatmul || fa.is_epilogue(a) ||
          fa.is_epilogue(b) || !compatible(g, a, b))
        continue;
      int ia = -1, ib = -1;
      int64_t ga = single_gemm_group(fa, g.nodes[a].output, &ia);
      int64_t gb = single_gemm_group(fa, g.nodes[b].output, &ib);
      if (ga == 0 || gb == 0 || (ga > 0 && ga == gb)) continue;
      if (ga > 0 && fa.members(ga).size() != 1) continue;  // a GEMM with an epilogue of its own
      if (gb > 0 && fa.members(gb).size() != 1) continue;
      int64_t reader = sole_reader_group(fa, g.nodes[a].output);
      if (reader == 0 || reader != sole_reader_group(fa, g.nodes[b].output)) continue;
      if (fuse_pair(fa, ga, a, gb, b, {})) return true;
    }
  }
  return false;
}

}  // namespace

Graph fuse_gate_up(const Graph& g) {
  FusionAssignment fa(g);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) changed |= fuse_swiglu(fa, static_cast<int>(i));
  while (fuse_shared_input(fa)) changed = true;
  return changed ? fa.apply() : g;
}

}  // namespace dg
