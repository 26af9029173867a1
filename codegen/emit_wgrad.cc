// Lowering of a weight-gradient group (Note [Weight-gradient groups] in
// passes/split_weight_grads.cc): one kernel of partial products over token chunks, whose last
// block per output tile sums the tile's partials in chunk order. Operands are fp32 (LoRA adapters)
// or bf16 read through their prologue and staged in shared memory as f32 (Note [Weight-gradient
// staging] in codegen/device/dg_wgrad.cuh); a block computes a TP x TQ tile with 8 warps on
// tensor cores, from bf16 splits that keep f32 accuracy (Note [Weight-gradient products on
// tensor cores], there); the tile is 256 x 16 or 16 x 256 when one side is a LoRA rank, else
// 64 x 64.
#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/kernel_params.h"
#include "codegen/lowering.h"
#include "codegen/scalar_ops.h"
#include "codegen/tile_choice.h"
#include "codegen/wgrad.h"

namespace dg {

namespace {

constexpr int kThreads = 256;

std::string round_to(DType t, const std::string& expr) {
  return "dg_round<" + ctype(t) + ", float>(" + expr + ")";
}

// A tensor an operand's prologue reads: element (r, c) at r * W + c, where r is the token index
// (a token row, contiguous along the operand's columns) or the column (contiguous along tokens).
struct Leaf {
  BufferRef buffer;
  std::string param, var;  // the kernel parameter; the staging registers' array
  DType dtype;
  bool token_rows;
  SymExpr W;
  bool vector = false;  // 16-byte loads when aligned (Note [Weight-gradient staging])
};

// One operand of a problem as the block stages it: 16 tokens x `extent` columns from `origin`.
struct Operand {
  std::string name;  // "a" or "b"
  std::string smem, origin, bound;
  int64_t extent = 0;
  int lanes = 4;     // V: neighbouring columns per vector
  std::string expr;  // element (k, c) of lanes j of slot i, from the leaves' registers
  std::vector<Leaf> leaves;
  int64_t vectors() const { return 16 * extent / lanes; }
  // A vector's lanes are all inside the operand or all outside.
  bool bound_in_vectors() const { return std::stoll(bound) % lanes == 0; }
  int64_t slots() const { return (vectors() + kThreads - 1) / kThreads; }
};

bool widened_by_lanes(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// Whether every element of v, as the prologue computes it, is a bf16 value: its bf16 split is
// exact and the products skip its lo term (Note [Weight-gradient products on tensor cores]). A
// group member's result is rounded to its dtype, so a bf16 one is; a permute, or a widening
// cast to f32 or f64, keeps what its input holds.
bool bf16_exact(const Graph& g, const std::set<int>& members, ValueId v) {
  const DType t = g.tensor(v).dtype;
  if (t == DType::kBF16) return true;
  const int p = g.value(v).producer;
  if (p < 0 || !members.count(p)) return false;
  const Node& n = g.nodes[p];
  const bool widening =
      op_info(n.op).category == OpCategory::kCast && (t == DType::kF32 || t == DType::kF64);
  if (n.op == OpKind::kPermute || widening) return bf16_exact(g, members, n.inputs[0]);
  // x * 2^j, j >= 0 (LoRA's alpha / r, often 2): the exponent moves, the mantissa stays, and a
  // finite result is a bf16 (the two share f32's exponent range; j >= 0 makes no subnormal).
  if (n.op == OpKind::kMul && (t == DType::kF32 || t == DType::kF64))
    for (int c = 0; c < 2; ++c) {
      const ValueId k = n.inputs[c];
      const int q = g.value(k).producer;
      if (g.tensor(k).rank() != 0 || q < 0 || g.nodes[q].op != OpKind::kConstant) continue;
      const double value = g.nodes[q].attrs.get_float("value").value_or(0.0);
      int exponent = 0;
      if (std::fabs(value) >= 1 && std::frexp(value, &exponent) == std::copysign(0.5, value) &&
          bf16_exact(g, members, n.inputs[1 - c]))
        return true;
    }
  return false;
}

// Element (r, c) of the 2-d value `v` as a float expression, where r and c are "k" (the token) or
// "c" (the operand's column): group members (the prologue) are evaluated in place, anything else
// is a leaf read from the staging registers.
std::string element(LoweringContext& ctx, KernelParams& params, const std::set<int>& members,
                    Operand& op, ValueId v, const std::string& r, const std::string& c) {
  const Graph& g = ctx.graph();
  const TensorType& t = g.tensor(v);
  int p = g.value(v).producer;
  if (p < 0 || !members.count(p)) {
    const BufferRef buffer = ctx.buffer_of(v);
    const std::string param = params.add(buffer, t.dtype, false);
    const bool token_rows = r == "k";
    for (const Leaf& l : op.leaves)
      if (l.param == param && l.token_rows == token_rows) return l.var + "[i].lane(j)";
    op.leaves.push_back({buffer, param, op.name + std::to_string(op.leaves.size()), t.dtype,
                         token_rows, t.shape[1]});
    return op.leaves.back().var + "[i].lane(j)";
  }
  const Node& n = g.nodes[p];
  if (n.op == OpKind::kPermute) return element(ctx, params, members, op, n.inputs[0], c, r);
  if (op_info(n.op).category == OpCategory::kCast)
    return round_to(t.dtype, element(ctx, params, members, op, n.inputs[0], r, c));
  std::vector<std::string> args;
  for (ValueId in : n.inputs) {
    int q = g.value(in).producer;
    if (g.tensor(in).rank() == 0 && q >= 0 && g.nodes[q].op == OpKind::kConstant) {
      DType ct = g.tensor(in).dtype;
      args.push_back(round_to(ct, c_float(g.nodes[q].attrs.get_float("value").value_or(0.0))));
    } else {
      args.push_back(element(ctx, params, members, op, in, r, c));
    }
  }
  std::string e = scalar_expr(n.op, args);
  if (e.empty()) throw std::logic_error("no spelling for " + std::string(op_name(n.op)));
  return round_to(t.dtype, e);
}

// Reads the operand's prologue, and picks its vector width and which leaves load 16 bytes at once.
Operand make_operand(LoweringContext& ctx, KernelParams& params, const std::set<int>& members,
                     const std::string& name, ValueId v, bool rows_are_columns, int64_t extent,
                     int64_t bound, const std::string& origin) {
  Operand op;
  op.name = name;
  op.smem = name == "a" ? "As" : "Bs";
  op.origin = origin;
  op.bound = std::to_string(bound);
  op.extent = extent;
  op.expr = rows_are_columns ? element(ctx, params, members, op, v, "c", "k")
                             : element(ctx, params, members, op, v, "k", "c");
  auto vectorizable = [&](const Leaf& l, int lanes) {
    return l.token_rows && widened_by_lanes(l.dtype) && dtype_size(l.dtype) * lanes == 16 &&
           l.W.is_const() && *l.W.as_const() % lanes == 0;
  };
  for (const Leaf& l : op.leaves)
    if (widened_by_lanes(l.dtype) && vectorizable(l, 16 / dtype_size(l.dtype))) {
      op.lanes = 16 / dtype_size(l.dtype);
      break;
    }
  for (Leaf& l : op.leaves) {
    l.vector = vectorizable(l, op.lanes);
    if (l.vector) params.add_checked(l.buffer, l.dtype, SymExpr(0));
  }
  return op;
}

std::string str(int64_t v) { return std::to_string(v); }

// Declarations of the operand's staging registers and alignment flags.
std::string staging_registers(const Operand& op) {
  std::string s;
  for (const Leaf& l : op.leaves) {
    const std::string type = widened_by_lanes(l.dtype) && dtype_size(l.dtype) * op.lanes == 16
                                 ? "DgWgradVector<" + ctype(l.dtype) + ">"
                                 : "DgWgradLanes<" + ctype(l.dtype) + ", " + str(op.lanes) + ">";
    s += "    " + type + " " + l.var + "[" + str(op.slots()) + "];\n";
    if (l.vector)
      s += "    const bool " + l.var + "_aligned = dg_wgrad_aligned16(" + l.param + ");\n";
  }
  return s;
}

// The head of a loop over the thread's vectors of a stage: slot i, vector e, its token row `row`
// and first column `cv` in the tile.
std::string for_each_vector(const Operand& op) {
  const std::string per_row = str(op.extent / op.lanes);
  return "      DG_UNROLL\n      for (int i = 0; i < " + str(op.slots()) +
         "; ++i) {\n        const int e = threadIdx.x + " + str(kThreads) + " * i;\n" +
         (op.vectors() % kThreads != 0 ? "        if (e >= " + str(op.vectors()) + ") break;\n"
                                       : "") +
         "        const int row = e / " + per_row + ", cv = " + str(op.lanes) + " * (e % " +
         per_row + ");\n        const long long k = k0 + row;\n        const int c = (int)" +
         op.origin + " + cv;\n";
}

// n: the vector's lanes inside the operand (at most 0 past k_end or the last column). 32-bit
// compares: 64-bit ones per lane took a fifth of the loop's instructions.
std::string lanes_inside(const Operand& op) {
  return "        const int n = k < k_end ? " + op.bound + " - c : 0;\n";
}

// Whether all of the vector's lanes are inside the operand.
std::string whole_vector(const Operand& op) {
  return op.bound_in_vectors() ? "n > 0" : "n >= " + str(op.lanes);
}

// A lambda issuing the loads of the stage at k0 into the operand's registers: with `vectors`,
// each vector leaf in 16-byte loads (the caller checked their alignment), else element by element.
std::string stage_loads(const Operand& op, bool vectors) {
  std::string s = "    auto " + op.name + "_load = [&](const long long k0) {\n" +
                  for_each_vector(op) + lanes_inside(op);
  for (const Leaf& l : op.leaves) {
    const std::string W = c_expr(l.W);
    const std::string row = l.param + " + (k * " + W + " + c)";
    const std::string at = l.token_rows ? row + ", 1" : l.param + " + (c * " + W + " + k), " + W;
    const bool bits = widened_by_lanes(l.dtype) && dtype_size(l.dtype) * op.lanes == 16;
    if (l.vector && vectors && op.bound_in_vectors())
      s += "        " + l.var + "[i].load_whole(" + row + ", n > 0);\n";
    else
      s += "        " + l.var + "[i].load(" + at + ", n" +
           (bits ? l.vector && vectors ? ", " + whole_vector(op) : ", false" : "") + ");\n";
  }
  return s + "      }\n    };\n";
}

// The k loop (Note [Weight-gradient k loop]), behind its staging's loads.
std::string k_loop(const Operand& a, const Operand& b, bool vectors) {
  return stage_loads(a, vectors) + stage_loads(b, vectors) +
         "    if (k_begin < k_end) {\n"
         "      a_load(k_begin);\n"
         "      b_load(k_begin);\n"
         "    }\n"
         "    for (long long k0 = k_begin; k0 < k_end; k0 += 16) {\n"
         "      a_store(k0);\n"
         "      b_store(k0);\n"
         "      __syncthreads();\n"
         "      if (k0 + 16 < k_end) {  // the next step's loads, in flight during this step's "
         "MMAs\n"
         "        a_load(k0 + 16);\n"
         "        b_load(k0 + 16);\n"
         "      }\n"
         "      mma.multiply(&As[0][0], &Bs[0][0], 256 + 4, acc);\n"
         "      __syncthreads();\n"
         "    }\n";
}

// The k loop for aligned vector leaves and the one for the rest, chosen once per block.
std::string k_loops(const Operand& a, const Operand& b) {
  std::string aligned;
  for (const Operand* op : {&a, &b})
    for (const Leaf& l : op->leaves)
      if (l.vector) aligned += (aligned.empty() ? "" : " && ") + l.var + "_aligned";
  if (aligned.empty()) return k_loop(a, b, false);
  return "    if (" + aligned + ") {\n" + k_loop(a, b, true) + "    } else {\n" +
         k_loop(a, b, false) + "    }\n";
}

// A lambda writing the stage at k0 from the registers to shared memory through the prologue.
std::string stage_stores(const Operand& op) {
  std::string s = "    auto " + op.name + "_store = [&](const long long k0) {\n" +
                  for_each_vector(op) + lanes_inside(op) + "        float v[" + str(op.lanes) +
                  "];\n        DG_UNROLL\n        for (int j = 0; j < " + str(op.lanes) +
                  "; ++j) v[j] = " + (op.bound_in_vectors() ? std::string("0") : "j") + " < n ? " +
                  op.expr + " : 0.0f;\n";
  for (int m = 0; m < op.lanes / 4; ++m) {
    const std::string o = str(4 * m);
    s += "        *reinterpret_cast<float4*>(&" + op.smem + "[row][cv + " + o +
         "]) = make_float4(v[" + o + "], v[" + str(4 * m + 1) + "], v[" + str(4 * m + 2) + "], v[" +
         str(4 * m + 3) + "]);\n";
  }
  return s + "      }\n    };\n";
}

struct Problem {
  const Node* node;
  int64_t P, Q, TP, TQ, tiles, offset;  // offset: first element in the partials' row
  // Operands of bf16 values (Note [Weight-gradient products on tensor cores]).
  bool a_exact = false, b_exact = false;
  // bf16 MMAs per product: the pairs of pieces DgWgradMma multiplies (Note [Weight-gradient
  // products on tensor cores]).
  int split_terms() const { return a_exact && b_exact ? 1 : a_exact || b_exact ? 3 : 6; }
};

// One problem's share of the kernel: its k loop, then its partials and, in the last block of the
// tile, their sum.
//
// Note [Weight-gradient k loop]
// The staging runs a step ahead in registers (Note [Weight-gradient staging] in
// codegen/device/dg_wgrad.cuh): step k0's vectors are stored, the loads of k0 + 16 issued, then
// step k0's MMAs run (Note [Weight-gradient products on tensor cores]). Each accumulator sums its
// products in k order within a chunk, and the chunks in chunk order: the bits do not depend on
// the launch. The loop is written twice: one for a block whose 16-byte leaves are all aligned,
// with no element path (a vector whose lanes all lie inside loads 16 bytes, one past k_end zero),
// and one for the rest; the choice is made once, not per load. With the alignment tested per
// load, both paths were in the loop: 16 2-byte loads and their packing beside each LDG.128, which
// the model (and the instruction cache) counted every step.
std::string problem_code(const Problem& pr, const Operand& a, const Operand& b, int64_t tile_base,
                         int64_t total, const std::string& out, DType out_dtype) {
  const std::string P = str(pr.P), Q = str(pr.Q), TP = str(pr.TP), TQ = str(pr.TQ);
  const std::string q_tiles = str(pr.Q / pr.TQ + (pr.Q % pr.TQ != 0));
  // float2 partials when every pair of columns (q even) starts 8-byte aligned in the workspace.
  const bool vec = pr.Q % 2 == 0 && total % 2 == 0 && pr.offset % 2 == 0;
  const std::string at = "p * " + Q + " + q";
  const std::string mma_type = "DgWgradMma<" + TP + ", " + TQ + ", " +
                               (pr.a_exact ? "true" : "false") + ", " +
                               (pr.b_exact ? "true" : "false") + ">";
  std::string s = "    const int t = tile - " + str(tile_base) + ";\n" +
                  "    const long long p0 = (long long)(t / " + q_tiles + ") * " + TP +
                  ", q0 = (long long)(t % " + q_tiles + ") * " + TQ + ";\n" + "    const " +
                  mma_type +
                  " mma(256 + 4);\n"
                  "    float acc[4][4];\n"
                  "    DG_UNROLL\n"
                  "    for (int i = 0; i < 4; ++i)\n"
                  "      DG_UNROLL\n"
                  "      for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;\n" +
                  staging_registers(a) + staging_registers(b) + stage_stores(a) + stage_stores(b) +
                  k_loops(a, b) + "    float* const partials = part + " + str(pr.offset) +
                  ";  // chunk c's at partials + c * " + str(total) +
                  "\n"
                  "    // acc[i][2 h + e]: row mma.row(i, h), column mma.col(i) + e of the tile\n"
                  "    if (gridDim.y > 1) {\n"
                  "      DG_UNROLL\n"
                  "      for (int i = 0; i < 4; ++i)\n"
                  "        DG_UNROLL\n"
                  "        for (int h = 0; h < 2; ++h) {\n"
                  "          const long long p = p0 + mma.row(i, h), q = q0 + mma.col(i);\n";
  if (vec)
    s += "          if (p < " + P + " && q < " + Q +
         ")\n            *reinterpret_cast<float2*>(partials + chunk * " + str(total) + " + " + at +
         ") = make_float2(acc[i][2 * h], acc[i][2 * h + 1]);\n";
  else
    s += "          DG_UNROLL\n          for (int e = 0; e < 2; ++e)\n            if (p < " + P +
         " && q + e < " + Q + ") partials[chunk * " + str(total) + " + " + at +
         " + e] = acc[i][2 * h + e];\n";
  s += "        }\n"
       "      if (!dg_wgrad_last_block(arrivals + tile, gridDim.y, &last_block)) return;\n"
       "    }\n"
       "    float sum[4][4];\n"
       "    DG_UNROLL\n"
       "    for (int i = 0; i < 4; ++i)\n"
       "      DG_UNROLL\n"
       "      for (int j = 0; j < 4; ++j) sum[i][j] = 0.0f;\n"
       "    for (long long c = 0; c < gridDim.y; ++c) {\n"
       "      DG_UNROLL\n"
       "      for (int i = 0; i < 4; ++i)\n"
       "        DG_UNROLL\n"
       "        for (int h = 0; h < 2; ++h) {\n"
       "          const long long p = p0 + mma.row(i, h), q = q0 + mma.col(i);\n";
  if (vec)
    s +=
        "          if (p >= " + P + " || q >= " + Q +
        ") continue;\n"
        "          const float2 x = c == chunk ? make_float2(acc[i][2 * h], acc[i][2 * h + 1])\n"
        "                                      : *reinterpret_cast<const float2*>(partials + c * " +
        str(total) + " + " + at +
        ");\n"
        "          sum[i][2 * h] += x.x;\n          sum[i][2 * h + 1] += x.y;\n";
  else
    s += "          DG_UNROLL\n          for (int e = 0; e < 2; ++e)\n            if (p < " + P +
         " && q + e < " + Q +
         ")\n              sum[i][2 * h + e] += c == chunk ? acc[i][2 * h + e] "
         ": partials[c * " +
         str(total) + " + " + at + " + e];\n";
  s += "        }\n"
       "    }\n"
       "    DG_UNROLL\n"
       "    for (int i = 0; i < 4; ++i)\n"
       "      DG_UNROLL\n"
       "      for (int j = 0; j < 4; ++j) {\n"
       "        const long long p = p0 + mma.row(i, j / 2), q = q0 + mma.col(i) + j % 2;\n"
       "        if (p < " +
       P + " && q < " + Q + ") " + out + "[" + at + "] = dg_convert<" + ctype(out_dtype) +
       ">(sum[i][j]);\n"
       "      }\n";
  return s;
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
  BufferRef part =
      ctx.workspace(chunks * SymExpr(total * 4), "weight-gradient partials, f32[" +
                                                     chunks.to_string() + ", " + str(total) + "]");
  std::string outputs;
  for (const Problem& pr : problems) outputs += " %" + std::to_string(pr.node->output);

  // blockIdx.x = tile over all problems, blockIdx.y = token chunk; the last block of a tile to
  // finish sums its partials (Note [Last block reduces] in codegen/emit_rank_gemm.cc).
  KernelParams params;
  params.add(part, DType::kF32, true);
  std::string body;
  int64_t base = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    const Problem& pr = problems[i];
    const Operand a =
        make_operand(ctx, params, set, "a", pr.node->inputs[0], true, pr.TP, pr.P, "p0");
    const Operand b =
        make_operand(ctx, params, set, "b", pr.node->inputs[1], false, pr.TQ, pr.Q, "q0");
    problems[i].a_exact = bf16_exact(g, set, pr.node->inputs[0]);
    problems[i].b_exact = bf16_exact(g, set, pr.node->inputs[1]);
    const DType out_dtype = g.tensor(pr.node->output).dtype;
    const std::string out = params.add(ctx.buffer_of(pr.node->output), out_dtype, true);
    body += std::string(i == 0 ? "  if" : "  } else if") + " (tile < " + str(base + pr.tiles) +
            ") {\n" + problem_code(pr, a, b, base, total, out, out_dtype);
    base += pr.tiles;
  }
  body += "  }\n";
  KernelLaunch k;
  k.name = ctx.kernel_name("wgrad_partials");
  k.summary = "weight gradients" + outputs + ": partial products over " + chunks.to_string() +
              " chunks of " + chunk.to_string() + " of K=" + K.to_string() +
              " tokens, summed in chunk order by the last block of each tile";
  // K = 0 still launches one chunk: its blocks write the zero gradients (the caller's outputs
  // come uninitialised).
  k.grid = {SymExpr(tiles), max(chunks, SymExpr(1)), SymExpr(1)};
  k.block = {kThreads, 1, 1};
  k.buffers = params.buffers();
  k.checked_operands = params.checked_operands();
  k.nodes = members;  // the cost model counts the products here (Note [Kernel cost model])
  // Note [Weight-gradient products on tensor cores]: the model times the most split terms.
  for (const Problem& pr : problems) k.split_terms = std::max(k.split_terms, pr.split_terms());
  const std::string counters = k.name + "_arrivals";
  std::string src =
      "#include \"dg_wgrad.cuh\"\n"
      "// Note [Arrival counters] (codegen/emit_rank_gemm.cc): zero at module load, left zero by\n"
      "// every launch.\n"
      "__device__ unsigned " +
      counters + "[" + str(tiles) + "] = {};\n" +
      "extern \"C\" __global__ void __launch_bounds__(" + str(kThreads) + ") " + k.name + "(" +
      params.declaration() + ctx.symbol_params() + ") {\n" + "  const long long K = " + c_expr(K) +
      ";\n"
      "  const long long chunk_tokens = " +
      c_expr(chunk) +
      ";\n  const long long chunk = blockIdx.y, k_begin = chunk * chunk_tokens;\n"
      "  const long long k_end = k_begin + chunk_tokens < K ? k_begin + chunk_tokens : K;\n"
      "  const int tile = blockIdx.x;\n"
      "  float* __restrict__ part = o0;\n"
      "  unsigned* const arrivals = " +
      counters +
      ";\n"
      "  __shared__ __align__(16) float As[16][256 + 4];\n"  // rows of 16-byte multiples
      "  __shared__ __align__(16) float Bs[16][256 + 4];\n"
      "  __shared__ bool last_block;\n" +
      body + "}\n";
  ctx.add_kernel(std::move(k), src);  // computes the group's nodes (the current ones)
}

}  // namespace dg
