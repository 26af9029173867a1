// concat_gemm_k: GEMMs whose results are only summed become one GEMM over the concatenated K.
//
// Note [K-concatenated GEMMs]
// A sum A1 B1 + A2 B2 (+ other terms) with A1 [M, K1], A2 [M, K2] and both products [M, N] is
// the product [A1 | A2] [B1; B2]: one GEMM whose K loop runs over both pairs into one fp32
// accumulator. In an expert's backward the input gradient is such a sum (gate and up
// projections), plus the LoRA rank-r terms, which stay as the sum's other terms. The rewrite
// spells the operands as `cat` along K; codegen reads each K segment from its own buffer (no copy).
// Rounding: the separate products were each rounded to their dtype before the adds; the single
// GEMM rounds once, which is at least as accurate and within the dtype's tolerance of the
// original. The terms' relative order is kept: the GEMM takes the place of the first product.
// Only matmuls (or bias-free linears) of one kind with 2-d operands, static K, the same result
// type and no other reader qualify, so the rewrite holds for every binding of the symbols.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "ir/fusion.h"
#include "passes/fusion_util.h"
#include "passes/graph_copier.h"
#include "passes/passes.h"

namespace dg {

namespace {

bool is_output(const Graph& g, ValueId v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

bool single_use(const Graph& g, ValueId v) {
  return users_of(g, v).size() == 1 && !is_output(g, v);
}

int producer(const Graph& g, ValueId v) { return g.value(v).producer; }

// A product that may join a K concatenation.
bool concat_candidate(const Graph& g, ValueId v) {
  int p = producer(g, v);
  if (p < 0 || !single_use(g, v) || g.nodes[p].attrs.has(kFusionAttr)) return false;
  const Node& n = g.nodes[p];
  if (n.op != OpKind::kMatmul && !(n.op == OpKind::kLinear && n.inputs.size() == 2)) return false;
  const TensorType &a = g.tensor(n.inputs[0]), &b = g.tensor(n.inputs[1]);
  return a.rank() == 2 && b.rank() == 2 && a.shape[1].is_const();
}

// The terms of the add tree rooted at `root` (adds of one type whose inner results have no other
// reader), left to right; `adds` gets the tree's add nodes.
void add_terms(const Graph& g, ValueId v, const TensorType& type, bool root,
               std::vector<ValueId>* terms, std::vector<int>* adds) {
  int p = producer(g, v);
  if (p >= 0 && g.nodes[p].op == OpKind::kAdd && g.tensor(v) == type &&
      g.tensor(g.nodes[p].inputs[0]) == type && g.tensor(g.nodes[p].inputs[1]) == type &&
      !g.nodes[p].attrs.has(kFusionAttr) && (root || single_use(g, v))) {
    adds->push_back(p);
    add_terms(g, g.nodes[p].inputs[0], type, false, terms, adds);
    add_terms(g, g.nodes[p].inputs[1], type, false, terms, adds);
    return;
  }
  terms->push_back(v);
}

}  // namespace

Graph concat_gemm_k(const Graph& g) {
  // Roots: adds whose result is not itself a term of a bigger tree.
  struct Rewrite {
    std::vector<ValueId> terms, products;
    std::vector<int> adds;
  };
  std::map<int, Rewrite> by_root;  // node index of the root add
  std::vector<bool> claimed(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if (n.op != OpKind::kAdd || claimed[i]) continue;
    Rewrite r;
    add_terms(g, n.output, g.tensor(n.output), true, &r.terms, &r.adds);
    for (int a : r.adds) claimed[a] = true;
    const Node* first = nullptr;
    for (ValueId t : r.terms) {
      if (!concat_candidate(g, t)) continue;
      const Node& p = g.nodes[producer(g, t)];
      if (first && (p.op != first->op || g.tensor(t) != g.tensor(first->output) ||
                    g.tensor(p.inputs[0]).dtype != g.tensor(first->inputs[0]).dtype ||
                    g.tensor(p.inputs[1]).dtype != g.tensor(first->inputs[1]).dtype))
        continue;
      if (!first) first = &p;
      r.products.push_back(t);
    }
    if (r.products.size() >= 2) by_root[static_cast<int>(i)] = r;
  }
  if (by_root.empty()) return g;

  GraphCopier copier(g);
  std::set<int> skipped;  // products and adds rebuilt at their root
  for (const auto& [root, r] : by_root) {
    for (ValueId t : r.products) skipped.insert(producer(g, t));
    for (int a : r.adds) skipped.insert(a);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto it = by_root.find(static_cast<int>(i));
    if (it == by_root.end()) {
      if (!skipped.count(static_cast<int>(i))) copier.copy_node(g.nodes[i]);
      continue;
    }
    const Rewrite& r = it->second;
    const Node& first = g.nodes[producer(g, r.products[0])];
    bool linear = first.op == OpKind::kLinear;
    std::vector<ValueId> as, bs;
    for (ValueId t : r.products) {
      as.push_back(copier.map(g.nodes[producer(g, t)].inputs[0]));
      bs.push_back(copier.map(g.nodes[producer(g, t)].inputs[1]));
    }
    auto cat = [&](const std::vector<ValueId>& parts, int64_t dim) {
      TensorType t = copier.partial().tensor(parts[0]);
      for (size_t j = 1; j < parts.size(); ++j)
        t.shape[dim] = t.shape[dim] + copier.partial().tensor(parts[j]).shape[dim];
      Attrs attrs;
      attrs.set("dim", dim);
      return copier.add_node(OpKind::kCat, parts, attrs, t);
    };
    // A is [M, K] (cat along 1); B is [K, N] for matmul (cat along 0), [N, K] for linear.
    ValueId a = cat(as, 1), b = cat(bs, linear ? 1 : 0);
    const TensorType& type = g.tensor(r.products[0]);
    ValueId product = copier.add_node(first.op, {a, b}, first.attrs, type);
    ValueId sum = -1;
    for (ValueId t : r.terms) {
      bool is_product = std::find(r.products.begin(), r.products.end(), t) != r.products.end();
      if (is_product && t != r.products[0]) continue;
      ValueId term = is_product ? product : copier.map(t);
      sum = sum < 0 ? term : copier.add_node(OpKind::kAdd, {sum, term}, {}, type);
    }
    copier.alias(g.nodes[i].output, sum);
  }
  return copier.finish();
}

}  // namespace dg
