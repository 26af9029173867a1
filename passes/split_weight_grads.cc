// split_weight_grads: the weight-gradient GEMMs of a backward graph, whose reduction runs over the
// token count, become one weight-gradient group (Note [Weight-gradient groups]).
//
// Note [Weight-gradient groups]
// A weight gradient dW[P, Q] = sum over tokens t of A[t, p] * B[t, q] is a matmul whose K is the
// dynamic token count while P and Q are static: a tile of the output has only P * Q / tile work
// items, so a kernel that loops over all of K in one block leaves the GPU idle, and float atomics
// would make the result depend on scheduling. Such matmuls (with K the same symbolic expression)
// form one group marked `split_tokens = C`: codegen lowers it as one kernel for every member
// together (codegen/emit_wgrad.cc): partial products over chunks of tokens, each block one
// output tile of one member for one chunk, written as fp32 to a workspace of
// chunks x (sum of P * Q) floats; the last block of each tile adds the tile's chunk partials in
// chunk order. A chunk holds at least C tokens and a multiple of 16; past that, K is cut into at
// most as many chunks as make two waves of blocks on an H100/H200 with the group's output tiles
// (Note [Tile choice] in codegen/tile_choice.cc): the seed's 36 tiles want 8 chunks, 288 blocks,
// which 512 and 4096 tokens get (513 gets 7 chunks of 80: rounding up to 16 tokens can leave one
// fewer), where a fixed 256-token chunk launched 72 blocks at 512 (and, at 4096, 576 blocks with
// twice the partials to sum). The chunk size is a function of K alone, so the sum order is fixed
// for each token count and the result deterministic, and one compile serves every token count (K =
// 0 gives zeros). The operands' prologues (permute, casts, elementwise ops with rank-0 constants,
// as in `permute(f32(g) * 2.0)`) are copied into the group and evaluated while the tiles load, so a
// scaled gradient that another kernel also reads need not be stored for this one.
#include <map>
#include <range/v3/algorithm/max.hpp>
#include <range/v3/view/transform.hpp>
#include <set>

#include "ir/fusion.h"
#include "passes/graph_copier.h"
#include "passes/passes.h"

namespace dg {

namespace {

constexpr int64_t kTokensPerChunk = 64;  // the smallest chunk

bool is_rank0_constant(const Graph& g, ValueId v) {
  int p = g.value(v).producer;
  return p >= 0 && g.nodes[p].op == OpKind::kConstant && g.tensor(v).rank() == 0;
}

// The prologue node producing `v`, if any, and the value it reads (through `*next`).
bool prologue_step(const Graph& g, ValueId v, ValueId* next) {
  int p = g.value(v).producer;
  if (p < 0 || fusion_group(g.nodes[p]) != 0) return false;
  const Node& n = g.nodes[p];
  const TensorType& t = g.tensor(v);
  if (t.rank() != 2 || !dtype_is_float(t.dtype)) return false;
  OpCategory c = op_info(n.op).category;
  if (n.op == OpKind::kPermute) {
    if (n.attrs.get_ints("dims") != std::vector<int64_t>{1, 0}) return false;
    *next = n.inputs[0];
    return true;
  }
  if (c == OpCategory::kCast || c == OpCategory::kUnary) {
    if (!dtype_is_float(g.tensor(n.inputs[0]).dtype)) return false;
    *next = n.inputs[0];
    return g.tensor(n.inputs[0]).shape == t.shape;
  }
  if (c == OpCategory::kBinary) {
    int data = is_rank0_constant(g, n.inputs[1]) ? 0 : is_rank0_constant(g, n.inputs[0]) ? 1 : -1;
    if (data < 0 || g.tensor(n.inputs[data]).shape != t.shape) return false;
    *next = n.inputs[data];
    return true;
  }
  return false;
}

// A matmul of 2-d operands with static P and Q whose K is symbolic.
bool is_weight_grad(const Graph& g, const Node& n) {
  if (n.op != OpKind::kMatmul || fusion_group(n) != 0) return false;
  const TensorType &a = g.tensor(n.inputs[0]), &b = g.tensor(n.inputs[1]);
  const TensorType& out = g.tensor(n.output);
  if (a.rank() != 2 || b.rank() != 2 || a.shape[1].is_const()) return false;
  if (!out.shape[0].is_const() || !out.shape[1].is_const()) return false;
  for (DType d : {a.dtype, b.dtype, out.dtype})
    if (d != DType::kF32 && d != DType::kBF16) return false;
  return true;
}

}  // namespace

Graph split_weight_grads(const Graph& g) {
  // Candidates, grouped by their K; a candidate that (transitively) reads another is left alone.
  std::vector<bool> after_candidate(g.nodes.size(), false), candidate(g.nodes.size(), false);
  std::map<std::string, std::vector<int>> by_k;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool reads_candidate = false;
    for (ValueId in : n.inputs) {
      int p = g.value(in).producer;
      if (p >= 0 && after_candidate[p]) reads_candidate = true;
    }
    if (!reads_candidate && is_weight_grad(g, n)) {
      by_k[g.tensor(n.inputs[0]).shape[1].to_string()].push_back(static_cast<int>(i));
      after_candidate[i] = candidate[i] = true;
    } else {
      after_candidate[i] = reads_candidate;
    }
  }
  if (by_k.empty()) return g;

  // by_k is not empty, so neither is g.nodes. Ungrouped nodes have group 0.
  int64_t next_group = ranges::max(g.nodes | ranges::views::transform(fusion_group)) + 1;

  GraphCopier copier(g);
  for (size_t i = 0; i < g.nodes.size(); ++i)  // everything the groups read comes first
    if (!after_candidate[i]) copier.copy_node(g.nodes[i]);
  for (const auto& [k, members] : by_k) {
    Attrs mark;
    mark.set(kFusionAttr, next_group++);
    mark.set(kSplitTokensAttr, kTokensPerChunk);
    std::map<ValueId, ValueId> cloned;  // prologue values copied into this group
    // Copies the prologue chain ending at `v` into the group; returns the id standing for `v`.
    auto clone_chain = [&](auto&& self, ValueId v) -> ValueId {
      if (auto it = cloned.find(v); it != cloned.end()) return it->second;
      ValueId next;
      if (!prologue_step(g, v, &next)) return copier.map(v);
      const Node& n = g.nodes[g.value(v).producer];
      std::vector<ValueId> inputs;
      for (ValueId in : n.inputs) inputs.push_back(in == next ? self(self, in) : copier.map(in));
      Attrs attrs = n.attrs;
      for (const auto& [name, value] : mark.entries()) attrs.set(name, value);
      ValueId id = copier.add_node(n.op, std::move(inputs), attrs, g.tensor(v));
      cloned[v] = id;
      return id;
    };
    for (int m : members) {
      const Node& n = g.nodes[m];
      ValueId a = clone_chain(clone_chain, n.inputs[0]);
      ValueId b = clone_chain(clone_chain, n.inputs[1]);
      Attrs attrs = n.attrs;
      for (const auto& [name, value] : mark.entries()) attrs.set(name, value);
      copier.alias(n.output, copier.add_node(n.op, {a, b}, attrs, g.tensor(n.output)));
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)  // then what reads the gradients
    if (after_candidate[i] && !candidate[i]) copier.copy_node(g.nodes[i]);
  // The prologue chains now have copies inside the groups; originals nobody else reads go.
  return eliminate_dead_code(copier.finish());
}

}  // namespace dg
