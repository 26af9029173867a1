// hoist_gemm_scale: matmul(x * c, B) with c a rank-0 power-of-two constant becomes
// matmul(x, B) * c, so the GEMM reads x itself (through a cast prologue when x is a cast) and the
// scale rides in its epilogue. Backward graphs scale every LoRA gradient this way
// (grad_linear = f32(grad) * (alpha / r)) before its rank-r product.
//
// Exact: multiplying by a power of two only changes exponents, so it commutes with every
// rounding of the products and partial sums (as long as no partial sum overflows or becomes
// subnormal, the same condition under which the original is exact). Other constants would move a
// rounding point, so they are left alone; so is a linear with a bias (c (xW + b) != (cx)W + b).
#include <cmath>

#include "ir/fusion.h"
#include "passes/graph_copier.h"
#include "passes/passes.h"

namespace dg {

namespace {

// The power-of-two scale of `v` = mul(x, c) or mul(c, x) (same dtype as x), with x in `*x`.
bool scaled_by_power_of_two(const Graph& g, ValueId v, ValueId* x, ValueId* c) {
  int p = g.value(v).producer;
  if (p < 0 || g.nodes[p].op != OpKind::kMul || g.nodes[p].attrs.has(kFusionAttr)) return false;
  const Node& mul = g.nodes[p];
  for (int j = 0; j < 2; ++j) {
    ValueId k = mul.inputs[j], data = mul.inputs[1 - j];
    int kp = g.value(k).producer;
    if (kp < 0 || g.nodes[kp].op != OpKind::kConstant || g.tensor(k).rank() != 0) continue;
    double value = g.nodes[kp].attrs.get_float("value").value_or(0.0);
    int exponent = 0;
    if (!std::isfinite(value) || value == 0 || std::fabs(std::frexp(value, &exponent)) != 0.5)
      continue;
    if (g.tensor(data) != g.tensor(v)) continue;  // no promotion or broadcast in the mul
    *x = data;
    *c = k;
    return true;
  }
  return false;
}

}  // namespace

Graph hoist_gemm_scale(const Graph& g) {
  GraphCopier copier(g);
  bool changed = false;
  for (const Node& n : g.nodes) {
    ValueId x, c;
    bool gemm = n.op == OpKind::kMatmul || (n.op == OpKind::kLinear && n.inputs.size() == 2);
    if (!gemm || n.attrs.has(kFusionAttr) || !scaled_by_power_of_two(g, n.inputs[0], &x, &c) ||
        g.tensor(c).dtype != g.tensor(n.output).dtype) {
      copier.copy_node(n);
      continue;
    }
    const TensorType& out = g.tensor(n.output);
    ValueId product = copier.add_node(n.op, {copier.map(x), copier.map(n.inputs[1])}, n.attrs, out);
    copier.alias(n.output, copier.add_node(OpKind::kMul, {product, copier.map(c)}, {}, out));
    changed = true;
  }
  if (!changed) return g;
  return eliminate_dead_code(copier.finish());
}

}  // namespace dg
