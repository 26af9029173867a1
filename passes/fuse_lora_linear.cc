// fuse_lora_linear: PEFT's LoRA linear as one GEMM with a rank-r epilogue (Note [Fusion groups]).
//
//   base = linear(x, W)                      bf16, the GEMM (anchor)
//   t    = linear(cast(x, f32), A)           f32 [M, r]: its own small kernel (group of its own)
//   l    = linear(t, B)                      f32, rank-r: computed per element in the epilogue
//   y    = cast(add(base, mul(l, scale)), bf16)
// The epilogue reads the bf16-rounded base, adds the f32 update and rounds once: PyTorch's
// rounding points. Matches `add` either way round and the scale on either side of `mul` (or no
// scale at all); r must be static so the epilogue's loop is fixed.
#include <optional>

#include "passes/fusion_util.h"
#include "passes/passes.h"

namespace dg {

namespace {

constexpr int64_t kMaxRank = 128;  // the rank-r loop runs per output element

struct LoraMatch {
  int base, t, l, scale_mul, add, cast;  // node indices; scale_mul is -1 without a scale
};

int node_of(const Graph& g, ValueId v, OpKind op) {
  int p = producer_of(g, v);
  return (p >= 0 && g.nodes[p].op == op) ? p : -1;
}

bool ungrouped(const FusionAssignment& fa, std::initializer_list<int> nodes) {
  for (int n : nodes)
    if (n >= 0 && fa.group_of(n) != 0) return false;
  return true;
}

// The update side of the add: mul(l, c) / mul(c, l) with rank-0 c, or l itself.
bool match_update(const Graph& g, ValueId v, int* l, int* scale_mul) {
  *scale_mul = node_of(g, v, OpKind::kMul);
  if (*scale_mul >= 0) {
    const Node& m = g.nodes[*scale_mul];
    for (int side = 0; side < 2; ++side)
      if (is_scalar_constant(g, m.inputs[1 - side]) &&
          (*l = node_of(g, m.inputs[side], OpKind::kLinear)) >= 0)
        return true;
    return false;
  }
  *l = node_of(g, v, OpKind::kLinear);
  return *l >= 0;
}

std::optional<LoraMatch> match(const Graph& g, const FusionAssignment& fa, int cast) {
  const Node& c = g.nodes[cast];
  if (c.op != OpKind::kCast || g.tensor(c.output).dtype != DType::kBF16) return std::nullopt;
  LoraMatch m{-1, -1, -1, -1, node_of(g, c.inputs[0], OpKind::kAdd), cast};
  if (m.add < 0 || g.tensor(g.nodes[m.add].output).dtype != DType::kF32) return std::nullopt;
  const Node& add = g.nodes[m.add];
  for (int side = 0; side < 2 && m.base < 0; ++side) {
    int base = node_of(g, add.inputs[side], OpKind::kLinear);
    if (base < 0 || g.tensor(g.nodes[base].output).dtype != DType::kBF16) continue;
    if (!match_update(g, add.inputs[1 - side], &m.l, &m.scale_mul)) continue;
    m.base = base;
  }
  if (m.base < 0) return std::nullopt;
  const Node& base = g.nodes[m.base];
  const Node& l = g.nodes[m.l];
  const TensorType& out = g.tensor(base.output);
  if (l.inputs.size() != 2 || g.tensor(l.output) != TensorType{DType::kF32, out.shape})
    return std::nullopt;
  // t = linear(cast(x, f32), A): the same x as the base GEMM.
  m.t = node_of(g, l.inputs[0], OpKind::kLinear);
  if (m.t < 0) return std::nullopt;
  int xf = node_of(g, g.nodes[m.t].inputs[0], OpKind::kCast);
  if (xf < 0 || g.nodes[xf].inputs[0] != base.inputs[0]) return std::nullopt;
  auto r = g.tensor(g.nodes[m.t].output).shape.back().as_const();
  if (!r || *r < 1 || *r > kMaxRank || g.tensor(l.inputs[1]).rank() != 2) return std::nullopt;
  if (!ungrouped(fa, {m.base, m.t, m.l, m.scale_mul, m.add, m.cast})) return std::nullopt;
  return m;
}

}  // namespace

Graph fuse_lora_linear(const Graph& g) {
  FusionAssignment fa(g);
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto m = match(g, fa, static_cast<int>(i));
    if (!m) continue;
    std::vector<int> kernel = {m->base, m->l, m->add, m->cast};
    if (m->scale_mul >= 0) kernel.push_back(m->scale_mul);
    if (!fa.convex(kernel)) continue;
    fa.create(kernel);
    fa.mark_epilogue_matmul(m->l);
    fa.create({m->t});
    changed = true;
  }
  return changed ? fa.apply() : g;
}

}  // namespace dg
