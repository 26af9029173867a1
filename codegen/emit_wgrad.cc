// Lowering of a weight-gradient group (Note [Weight-gradient groups] in
// passes/split_weight_grads.cc): partial products over token chunks, then their reduction in
// chunk order. Operands are fp32 (LoRA adapters) or bf16 read through their prologue, so the
// products run on fp32 FMA tiles: a block computes a TP x TQ tile with 256 threads, each owning a
// 4 x 4 micro-tile (Note [Weight-gradient micro-tiles]); the tile is 256 x 16 or 16 x 256 when
// one side is a LoRA rank, else 64 x 64.
#include <map>
#include <set>
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/lowering.h"
#include "codegen/scalar_ops.h"
#include "codegen/tile_choice.h"
#include "codegen/wgrad.h"

namespace dg {

namespace {

// Pointer parameters of a kernel; a buffer read twice is passed once.
class ParamList {
 public:
  std::string add(BufferRef b, DType dtype, bool output) {
    for (size_t i = 0; i < buffers_.size(); ++i)
      if (buffers_[i] == b) return names_[i];
    std::string name = (output ? "o" : "p") + std::to_string(buffers_.size());
    decl_ += (decl_.empty() ? "" : ", ") + std::string(output ? "" : "const ") + ctype(dtype) +
             "* __restrict__ " + name;
    buffers_.push_back(b);
    names_.push_back(name);
    return name;
  }
  const std::string& declaration() const { return decl_; }
  const std::vector<BufferRef>& buffers() const { return buffers_; }

 private:
  std::vector<BufferRef> buffers_;
  std::vector<std::string> names_;
  std::string decl_;
};

std::string round_to(DType t, const std::string& expr) {
  return "dg_convert<float>(dg_convert<" + ctype(t) + ">(" + expr + "))";
}

// Element (r, c) of the 2-d value `v` as a float expression: group members (the prologue) are
// evaluated in place, anything else is loaded from its buffer.
std::string element(LoweringContext& ctx, ParamList& params, const std::set<int>& members,
                    ValueId v, const std::string& r, const std::string& c) {
  const Graph& g = ctx.graph();
  const TensorType& t = g.tensor(v);
  int p = g.value(v).producer;
  if (p < 0 || !members.count(p)) {
    std::string name = params.add(ctx.buffer_of(v), t.dtype, false);
    return "dg_convert<float>(" + name + "[(" + r + ") * " + c_expr(t.shape[1]) + " + (" + c +
           ")])";
  }
  const Node& n = g.nodes[p];
  if (n.op == OpKind::kPermute) return element(ctx, params, members, n.inputs[0], c, r);
  if (op_info(n.op).category == OpCategory::kCast)
    return round_to(t.dtype, element(ctx, params, members, n.inputs[0], r, c));
  std::vector<std::string> args;
  for (ValueId in : n.inputs) {
    int q = g.value(in).producer;
    if (g.tensor(in).rank() == 0 && q >= 0 && g.nodes[q].op == OpKind::kConstant) {
      DType ct = g.tensor(in).dtype;
      args.push_back(round_to(ct, c_float(g.nodes[q].attrs.get_float("value").value_or(0.0))));
    } else {
      args.push_back(element(ctx, params, members, in, r, c));
    }
  }
  std::string e = scalar_expr(n.op, args);
  if (e.empty()) throw std::logic_error("no spelling for " + std::string(op_name(n.op)));
  return round_to(t.dtype, e);
}

struct Problem {
  const Node* node;
  int64_t P, Q, TP, TQ, tiles, offset;  // offset: first element in the partials' row
};

// One problem's share of the partials kernel.
//
// Note [Weight-gradient micro-tiles]
// Each thread owns 4 neighbouring rows x 4 neighbouring columns of the tile, so a k step reads its
// operands as one float4 each from shared memory (16 FMAs per two shared loads, where rows strided
// across the threads took eight). The staging loops have compile-time trip counts (16 x TP and 16 x
// TQ are multiples of the 256 threads) but stay rolled: fully unrolled, ptxas hoisted their loads
// into 196 registers (one block per SM), and held to 64 it spilled. Each output sums its products
// in k order, as before: the bits do not change.
std::string problem_code(LoweringContext& ctx, ParamList& params, const std::set<int>& members,
                         const Problem& pr, int64_t tile_base, const std::string& total) {
  const std::string P = std::to_string(pr.P), Q = std::to_string(pr.Q);
  const std::string TP = std::to_string(pr.TP), TQ = std::to_string(pr.TQ);
  const std::string a = element(ctx, params, members, pr.node->inputs[0], "p", "k");
  const std::string b = element(ctx, params, members, pr.node->inputs[1], "k", "q");
  const std::string q_tiles = std::to_string(pr.Q / pr.TQ + (pr.Q % pr.TQ != 0));
  const std::string tq_threads = std::to_string(pr.TQ / 4);
  // acc[i][j] += a_i * b_j over the float4s' lanes, written out: through float[4] copies of the
  // float4s, ptxas spilled one register of the Phi-3.5-MoE backward's kernel on sm_90a.
  auto outer_product = [](const std::string& a, const std::string& b) {
    const char* lane[4] = {".x", ".y", ".z", ".w"};
    std::string s;
    for (int i = 0; i < 4; ++i) {
      s += "        ";
      for (int j = 0; j < 4; ++j)
        s += std::string(j ? " " : "") + "acc[" + std::to_string(i) + "][" + std::to_string(j) +
             "] += " + a + lane[i] + " * " + b + lane[j] + ";";
      s += "\n";
    }
    return s;
  };
  // Stages rows [k0, k0 + 16) of one operand, `extent` columns from `origin`, into `smem`.
  auto stage = [](const std::string& smem, const std::string& extent, const std::string& origin,
                  const std::string& bound, const std::string& index, const std::string& value) {
    return "      DG_NO_UNROLL\n"
           "      for (int i = 0; i < 16 * " +
           extent + " / 256; ++i) {\n" + "        const int e = threadIdx.x + 256 * i;\n" +
           "        const long long k = k0 + e / " + extent + ", " + index + " = " + origin +
           " + e % " + extent + ";\n" + "        " + smem + "[e / " + extent + "][e % " + extent +
           "] = (k < k_end && " + index + " < " + bound + ") ? " + value + " : 0.0f;\n      }\n";
  };
  return "    const int t = tile - " + std::to_string(tile_base) + ";\n" +
         "    const long long p0 = (long long)(t / " + q_tiles + ") * " + TP +
         ", q0 = (long long)(t % " + q_tiles + ") * " + TQ + ";\n" +
         "    const int tq = threadIdx.x % " + tq_threads + ", tp = threadIdx.x / " + tq_threads +
         ";\n"
         "    float acc[4][4];\n"
         "    DG_UNROLL\n"
         "    for (int i = 0; i < 4; ++i)\n"
         "      DG_UNROLL\n"
         "      for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;\n"
         "    for (long long k0 = k_begin; k0 < k_end; k0 += 16) {\n" +
         stage("As", TP, "p0", P, "p", a) + stage("Bs", TQ, "q0", Q, "q", b) +
         "      __syncthreads();\n"
         "      DG_UNROLL\n"
         "      for (int kk = 0; kk < 16; ++kk) {\n"
         "        const float4 a4 = reinterpret_cast<const float4*>(As[kk])[tp];\n"
         "        const float4 b4 = reinterpret_cast<const float4*>(Bs[kk])[tq];\n" +
         outer_product("a4", "b4") +
         "      }\n"
         "      __syncthreads();\n"
         "    }\n"
         "    DG_UNROLL\n"
         "    for (int i = 0; i < 4; ++i)\n"
         "      DG_UNROLL\n"
         "      for (int j = 0; j < 4; ++j) {\n"
         "        const long long p = p0 + 4 * tp + i, q = q0 + 4 * tq + j;\n"
         "        if (p < " +
         P + " && q < " + Q + ")\n" + "          part[chunk * " + total + " + " +
         std::to_string(pr.offset) + " + p * " + Q + " + q] = acc[i][j];\n" + "      }\n";
}

}  // namespace

void emit_wgrad_group(LoweringContext& ctx, const std::vector<int>& members) {
  const Graph& g = ctx.graph();
  std::set<int> set(members.begin(), members.end());
  int64_t min_chunk = g.nodes[members[0]].attrs.get_int(kSplitTokensAttr).value_or(0);
  if (min_chunk <= 0) throw std::logic_error("a weight-gradient group without split_tokens");
  std::vector<Problem> problems;
  SymExpr K;
  int64_t total = 0, tiles = 0;
  for (int m : members) {
    const Node& n = g.nodes[m];
    if (n.op != OpKind::kMatmul) continue;
    const TensorType& out = g.tensor(n.output);
    SymExpr k = g.tensor(n.inputs[0]).shape[1];
    if (problems.empty()) K = k;
    if (k != K) throw std::logic_error("a weight-gradient group mixes token counts");
    Problem pr{&n, *out.shape[0].as_const(), *out.shape[1].as_const(), 64, 64, 0, total};
    if (pr.Q <= 16)
      pr.TP = 256, pr.TQ = 16;
    else if (pr.P <= 16)
      pr.TP = 16, pr.TQ = 256;
    pr.tiles = ((pr.P + pr.TP - 1) / pr.TP) * ((pr.Q + pr.TQ - 1) / pr.TQ);
    total += pr.P * pr.Q;
    tiles += pr.tiles;
    problems.push_back(pr);
  }
  // Note [Weight-gradient groups]: chunks of at least min_chunk tokens, at most as many as make two
  // waves of blocks on an H100/H200 (Note [Tile choice]), rounded up to 16 tokens (a K step).
  const int64_t target_chunks = (2 * kFillCtas + tiles - 1) / tiles;
  const SymExpr chunk = max(SymExpr(min_chunk),
                            SymExpr(16) * ceildiv(ceildiv(K, SymExpr(target_chunks)), SymExpr(16)));
  SymExpr chunks = ceildiv(K, chunk);
  std::string total_s = std::to_string(total);
  BufferRef part =
      ctx.workspace(chunks * SymExpr(total * 4),
                    "weight-gradient partials, f32[" + chunks.to_string() + ", " + total_s + "]");
  std::string outputs;
  for (const Problem& pr : problems) outputs += " %" + std::to_string(pr.node->output);

  // Kernel 1: partial products, blockIdx.x = tile over all problems, blockIdx.y = token chunk.
  ParamList params;
  params.add(part, DType::kF32, true);
  std::string body;
  int64_t base = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    body += std::string(i == 0 ? "  if" : "  } else if") + " (tile < " +
            std::to_string(base + problems[i].tiles) + ") {\n" +
            problem_code(ctx, params, set, problems[i], base, total_s);
    base += problems[i].tiles;
  }
  body += "  }\n";
  KernelLaunch k1;
  k1.name = ctx.kernel_name("wgrad_partials");
  k1.summary = "weight gradients" + outputs + ": partial products over " + chunks.to_string() +
               " chunks of " + chunk.to_string() + " of K=" + K.to_string() + " tokens";
  k1.grid = {SymExpr(tiles), chunks, SymExpr(1)};
  k1.block = {256, 1, 1};
  k1.buffers = params.buffers();
  k1.nodes = members;  // the cost model counts the products here (Note [Kernel cost model])
  std::string src1 =
      "extern \"C\" __global__ void __launch_bounds__(256) " + k1.name + "(" +
      params.declaration() + ctx.symbol_params() + ") {\n" + "  const long long K = " + c_expr(K) +
      ";\n"
      "  const long long chunk_tokens = " +
      c_expr(chunk) +
      ";\n  const long long chunk = blockIdx.y, k_begin = chunk * chunk_tokens;\n"
      "  const long long k_end = k_begin + chunk_tokens < K ? k_begin + chunk_tokens : K;\n"
      "  const int tile = blockIdx.x;\n"
      "  float* __restrict__ part = o0;\n"
      "  __shared__ __align__(16) float As[16][256 + 4];\n"  // rows of 16-byte multiples
      "  __shared__ __align__(16) float Bs[16][256 + 4];\n" +
      body + "}\n";
  ctx.add_kernel(std::move(k1), src1);  // computes the group's nodes (the current ones)

  // Kernel 2: out[e] = sum over chunks c = 0, 1, ... of part[c][e], in that order.
  ParamList rparams;
  rparams.add(part, DType::kF32, false);
  std::string stores;
  for (size_t i = 0; i < problems.size(); ++i) {
    const Problem& pr = problems[i];
    DType t = g.tensor(pr.node->output).dtype;
    std::string o = rparams.add(ctx.buffer_of(pr.node->output), t, true);
    std::string end = std::to_string(pr.offset + pr.P * pr.Q);
    stores += std::string(i == 0 ? "    if" : "    else if") + " (e < " + end + ") " + o + "[e - " +
              std::to_string(pr.offset) + "] = dg_convert<" + ctype(t) + ">(a);\n";
  }
  KernelLaunch k2;
  k2.name = ctx.kernel_name("wgrad_reduce");
  k2.summary = "weight gradients" + outputs + ": chunk partials summed in chunk order";
  k2.grid = grid_for(SymExpr(total));
  k2.block = {256, 1, 1};
  k2.buffers = rparams.buffers();
  // For the cost model the reduction is data movement: it is listed with the group's permutes
  // (0 FLOPs) rather than the current node, a matmul whose FLOPs kernel 1 already counts; its
  // adds (one per partial) are left out of the FLOP count.
  for (int m : members)
    if (g.nodes[m].op == OpKind::kPermute) k2.nodes.push_back(m);
  std::string src2 = "extern \"C\" __global__ void __launch_bounds__(256) " + k2.name + "(" +
                     rparams.declaration() + ctx.symbol_params() + ") {\n" +
                     "  const long long chunks = " + c_expr(chunks) +
                     ";\n"
                     "  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < " +
                     total_s +
                     ";\n       e += (long long)gridDim.x * blockDim.x) {\n"
                     "    float a = 0.0f;\n"
                     "    for (long long c = 0; c < chunks; ++c) a += p0[c * " +
                     total_s + " + e];\n" + stores + "  }\n}\n";
  // The reduction computes no node of the graph: its cost is the bytes it moves.
  ctx.set_current_nodes({});
  ctx.add_kernel(std::move(k2), src2);
}

}  // namespace dg
