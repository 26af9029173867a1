// The LoRA rank-r products (x @ A^T with a handful of output columns and a long K) as a split-K
// pair of kernels: partial products over K chunks into workspace, then their reduction in chunk
// order with the GEMM's epilogue.
#include <stdexcept>

#include "codegen/c_expr.h"
#include "codegen/gemm_snippets.h"
#include "codegen/rank_gemm.h"

namespace dg {

// Note [Rank-r products]
// x @ [A_gate; A_up]^T has M = tokens, N = r (16-64 columns) and K = hidden (1-6K): a 64x64 tile
// gives ceil(M/64) CTAs that each walk all of K, 8 CTAs on 132 SMs at M = 512. Here a CTA owns BM
// rows x all NCP columns (the B operands side by side, padded to 16, 32 or 64) over one chunk of
// K, so the grid is ceil(M/BM) x S x problems with S chosen at launch from M (kTargetCtas below).
// Per k-tile of 32 the CTA stages A (BM x 32) and B (32 x NCP) in shared memory as fp32, read
// with 16-byte loads (Note [16-byte operand loads]) and widened on the way in (a fused bf16 ->
// f32 cast is exact); each of the 8 warps multiplies one m16n8 tile of them on tensor cores
// (Note [Rank-r split-K on tensor cores] in codegen/device/dg_rank_mma.cuh). The partials go to
// workspace as f32[problems, S, M, NCP];
// the last CTA of a row tile to finish sums them over s = 0, 1, ... in that order and applies the
// epilogue (Note [Last block reduces]): fixed for a given M, no float atomics, the same bits on
// every run. Sums stay fp32 and the products keep about 2^-15 of their f32 values (the bf16
// split); the summation order differs from a serial K loop.

// Note [Last block reduces]
// The split-K partials used to be summed by a second kernel, one launch (~3.5 us) per rank-r
// product: two of the seed forward's six. Now each CTA, after storing its partials, fences and
// counts itself on its row tile's arrival counter (an integer atomicAdd); the CTA that counts
// S - 1 is the last, resets the counter to 0, and sums the tile's partials in split order
// (s = 0, 1, ...: the order does not depend on which CTA is last) before the epilogue. With S = 1
// the CTA sums its own partials with no counter.
// Why this design (estimates for H200, the seed's gate/up and down products):
// - Folding the products into the base GEMM (A's rows appended to B, a bf16 hi/mid/lo split of
//   the f32 A for f32 accuracy) recomputes x @ A^T in every N tile: 96 more B columns beside the
//   gate/up tile's 128 (+75% tensor work), and U must then cross warps through shared memory, a
//   change to the main loops' warp layout. About +5 us at s = 512, +40 us at 4096.
// - The consumer GEMM summing the partials as it stages U re-reads S partials per N tile: at
//   s = 512 (S = 16) 64 KB per CTA of k2, 16 MB from L2 in all, and U could no longer be a graph
//   value other kernels read.
// - The last block's sum reads S x BM x NCP floats from L2 once per row tile (64 KB at s = 512,
//   ~1 us at the tail of the launch, S = 3 at 4096) and saves a launch per product: ~3 us each.
// The counters (Note [Arrival counters]) are the one piece of state that outlives a launch.
//
// Note [Arrival counters]
// A row tile's counter must read 0 when the launch starts, and the workspace comes from the
// caller uninitialised (dg_launch in runtime/dyngen.h). So the counters are a `__device__`
// array of the module, zero-initialised when the module is loaded (an explicit `= {}`: the
// loader copies the initial image; the host emulation's module is a shared object whose static
// storage starts zeroed), and every launch leaves them 0 again: the last CTA of each tile resets
// its counter after all S have counted. Only launches with S >= 2 count, and S >= 2 only when a
// problem has fewer than kTargetCtas row tiles (split_count), so kTargetCtas counters per problem
// suffice whatever M is. A kernel that faults mid-launch can leave counters non-zero, but a
// device fault is sticky: the context and its modules are gone, and the next context loads
// zeroed counters. Calls of one executable must not overlap on two streams of one device
// (their launches would share the counters): the runtime orders them (Note [One stream at a
// time] in runtime/kernel_module.cc).

namespace {

constexpr int kThreads = 256;
constexpr int kKTile = 32;  // fine-grained enough for 132+ CTAs at M = 512, K = 1024
// Below this K a CTA's walk over all of K is short: the 64x64 scalar tile serves, in one launch.
constexpr int64_t kMinK = 256;
// Two CTAs per SM on a 132-SM H100/H200 (CTAs are small: up to 8 fit on an SM); more splits only
// add partial traffic.
constexpr int64_t kTargetCtas = 264;

struct RankShape {
  int64_t N = 0, K = 0;
  int nb = 0, ncp = 0, bm = 0, tpr = 0;  // tpr: threads per row (4 columns each)
  bool b_k_contiguous = false;
  // Loaded from bf16, so exact in a bf16 hi part (Note [Rank-r split-K on tensor cores]).
  bool a_exact = false, b_exact = false;
  // MMAs per product: hi x hi, and one more per operand that needs its lo part.
  int split_terms() const { return 1 + !a_exact + !b_exact; }
};

int vec_of(DType t) { return 16 / static_cast<int>(dtype_size(t)); }

bool dtype_ok(const GemmOperandRef& op) {
  if (op.load_dtype != DType::kF32 && op.load_dtype != DType::kBF16) return false;
  // f32 values, or bf16 values read as bf16 (widening to f32 is exact either way).
  return op.value_dtype == DType::kF32 || op.value_dtype == op.load_dtype;
}

bool multiple(const SymExpr& e, int v) { return e.divisor() % v == 0; }  // divisor(0) == 0

RankShape rank_shape(const GemmKernelSpec& spec) {
  RankShape s;
  s.N = *spec.N.as_const();
  s.K = *spec.K.as_const();
  s.nb = static_cast<int>(spec.b.size());
  const int64_t nc = s.N * s.nb;
  s.ncp = nc <= 16 ? 16 : nc <= 32 ? 32 : 64;
  s.tpr = s.ncp / 4;
  s.bm = kThreads / s.tpr;
  s.b_k_contiguous = spec.b[0].row_stride == SymExpr(1);
  s.a_exact = spec.a.load_dtype == DType::kBF16;
  s.b_exact = spec.b[0].load_dtype == DType::kBF16;  // rank_gemm_eligible: every B alike
  return s;
}

// S: splits of K for the launch's M, between 1 and one k-tile per split; per problem, so that a
// grouped launch does each problem's work as its own launch would. The kernel gives each
// split ceil(k_tiles / S) k-tiles; S is rounded to ceil(k_tiles / that) so no split is empty.
SymExpr split_count(const SymExpr& M, const RankShape& s) {
  const SymExpr tiles = max(ceildiv(M, SymExpr(s.bm)), SymExpr(1));
  const SymExpr k_tiles((s.K + kKTile - 1) / kKTile);
  const SymExpr wanted = max(min(ceildiv(SymExpr(kTargetCtas), tiles), k_tiles), SymExpr(1));
  return ceildiv(k_tiles, ceildiv(k_tiles, wanted));
}

std::string zeros(const std::string& v, int n) {
  return "DG_UNROLL for (int i = 0; i < " + std::to_string(n) + "; ++i) " + v + "[i] = 0.0f;";
}

std::string store4(const std::string& dst, const std::string& v, int n) {
  std::string s;
  for (int q = 0; q < n / 4; ++q) {
    const std::string b = std::to_string(4 * q);
    s += "        " + dst + " + " + std::to_string(q) + "] = make_float4(" + v + "[" + b + "], " +
         v + "[" + b + " + 1], " + v + "[" + b + " + 2], " + v + "[" + b + " + 3]);\n";
  }
  return s;
}

// The B operand that column `n` (< NC) of the side-by-side B columns belongs to, and its column.
std::string b_select(const RankShape& s, const std::string& n, std::string* col) {
  const std::string N = std::to_string(s.N);
  if (s.nb == 1) {
    *col = n;
    return "b_ptr0";
  }
  *col = "(" + n + " < " + N + " ? " + n + " : " + n + " - " + N + ")";
  return "(" + n + " < " + N + " ? b_ptr0 : b_ptr1)";
}

// One operand's k-tile staged in shared memory: `count` loads of `vec` values; for load e (this
// thread's), `index` declares its place, `in_bounds` says whether it lies inside the operand (else
// zeros), `src` is its address and `dst` its float4s in shared memory (store4's prefix). The
// count is known here, so the loop over e is a fixed number of unrolled steps rather than a
// strided loop with a run-time trip count (which cost the K = 6400 partials kernel a spill on
// sm_80).
std::string stage(int count, int vec, const std::string& index, const std::string& in_bounds,
                  const std::string& src, const std::string& dst) {
  const int steps = (count + kThreads - 1) / kThreads;
  std::string s = "    DG_UNROLL for (int step = 0; step < " + std::to_string(steps) +
                  "; ++step) {\n      const int e = threadIdx.x + step * " +
                  std::to_string(kThreads) + ";\n";
  if (count % kThreads != 0) s += "      if (e >= " + std::to_string(count) + ") break;\n";
  return s + "      const int " + index + ";\n      float v[" + std::to_string(vec) +
         "];\n      if (" + in_bounds + ") dg_load16_float(v, " + src +
         ", aligned);\n      else { " + zeros("v", vec) + " }\n" + store4(dst, "v", vec) +
         "    }\n";
}

std::string tile_loads(const GemmKernelSpec& spec, const RankShape& s, const std::string& a_rs,
                       const std::string& b_stride) {
  const int va = vec_of(spec.a.load_dtype), vb = vec_of(spec.b[0].load_dtype);
  const std::string NC = std::to_string(s.N * s.nb), VA = std::to_string(va),
                    VB = std::to_string(vb);
  const std::string pa = std::to_string(kKTile / va);
  const std::string a = stage(
      s.bm * (kKTile / va), va, "m = e / " + pa + ", kv = e % " + pa + " * " + VA,
      "m0 + m < M && k0 + kv < k_end", "a_ptr + (m0 + m) * " + a_rs + " + k0 + kv", "As[m][kv / 4");
  std::string col;
  const std::string ptr = b_select(s, "n", &col);
  if (s.b_k_contiguous) {  // B column n is contiguous along k: Bs[n][k]
    const std::string pb = std::to_string(kKTile / vb);
    return a + stage(s.ncp * (kKTile / vb), vb, "n = e / " + pb + ", kv = e % " + pb + " * " + VB,
                     "n < " + NC + " && k0 + kv < k_end",
                     ptr + " + (long long)" + col + " * " + b_stride + " + k0 + kv",
                     "Bs[n][kv / 4");
  }
  // B row k is contiguous along n: Bs[k][n]
  const std::string pb = std::to_string(s.ncp / vb);
  return a + stage(kKTile * (s.ncp / vb), vb, "kk = e / " + pb + ", n = e % " + pb + " * " + VB,
                   "n < " + NC + " && k0 + kk < k_end",
                   ptr + " + (k0 + kk) * " + b_stride + " + " + col, "Bs[kk][n / 4");
}

// The tile's partials summed in split order and handed to the epilogue (Note [Last block
// reduces]): each thread takes elements e, e + 256, ... of the tile's BM x N outputs.
std::string tile_reduction(const std::vector<GemmKernelSpec>& problems, const RankShape& s,
                           const std::string& part) {
  const std::string N = std::to_string(s.N), NCP = std::to_string(s.ncp);
  std::string lambdas, sums, args;
  std::vector<std::string> calls;
  for (int j = 0; j < s.nb; ++j) {
    const std::string J = std::to_string(j);
    sums += "        acc" + J + " += __ldcg(q + s * M * " + NCP +
            (j ? " + " + std::to_string(j * s.N) : "") + ");\n";
    args += ", acc" + J;
  }
  for (size_t p = 0; p < problems.size(); ++p) {
    const std::string epi = "epi" + std::to_string(p);
    lambdas += epilogue_lambda(problems[p], "float", epi);
    calls.push_back("  " + epi + "(row, col" + args + ", DgDirectStores{});\n");
  }
  std::string decl = "      float acc0 = 0.0f";
  if (s.nb == 2) decl += ", acc1 = 0.0f";
  std::string call = calls.size() == 1 ? calls[0] : branch_by_problem(calls);
  std::string indented_call;  // four more spaces: inside the block and the loop
  for (size_t at = 0; at < call.size();) {
    const size_t next = call.find('\n', at) + 1;
    indented_call += "    " + call.substr(at, next - at);
    at = next;
  }
  return "  {\n    const long long N = " + N +
         ", S = gridDim.y;\n    const long long c_base = 0;\n" + lambdas +
         "    for (int e = threadIdx.x; e < " + std::to_string(s.bm) + " * " + N +
         "; e += " + std::to_string(kThreads) +
         ") {\n"
         "      const long long row = m0 + e / " +
         N +
         ";\n"
         "      if (row >= M) break;  // rows ascend with e\n"
         "      const int col = e % " +
         N +
         ";\n"
         "      const float* q = " +
         part + " + (problem * S * M + row) * " + NCP + " + col;\n" + decl +
         ";\n"
         "      for (long long s = 0; s < S; ++s) {\n" +
         sums + "      }\n" + indented_call + "    }\n  }\n";
}

// Counts the CTA on its row tile's arrival counter and returns from every CTA but the last
// (Note [Last block reduces], Note [Arrival counters]); with one split the CTA's own partials,
// stored by other threads, only need a barrier.
std::string last_block_election(const std::string& counters) {
  return "  __shared__ bool dg_last;\n"
         "  if (gridDim.y > 1) {\n"
         "    __threadfence();  // this thread's partials, visible before the CTA counts\n"
         "    __syncthreads();\n"
         "    if (threadIdx.x == 0) {\n"
         "      unsigned* const arrivals = " +
         counters + " + problem * " + std::to_string(kTargetCtas) +
         " + blockIdx.x;\n"
         "      dg_last = atomicAdd(arrivals, 1u) == gridDim.y - 1;\n"
         "      if (dg_last) atomicExch(arrivals, 0u);  // every CTA of the tile has counted\n"
         "    }\n"
         "    __syncthreads();\n"
         "    if (!dg_last) return;\n"
         "    __threadfence();  // the other CTAs' partials, read after their counts\n"
         "  } else {\n"
         "    __syncthreads();\n"
         "  }\n";
}

std::string split_k_source(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                           const RankShape& s, KernelParams& params, const std::string& part,
                           const std::string& name) {
  const GemmKernelSpec& first = problems[0];
  std::vector<std::string> a, a_rs;
  std::vector<std::vector<std::string>> b(s.nb);
  std::vector<std::string> b_stride;
  for (const GemmKernelSpec& spec : problems) {
    a.push_back(params.add_checked(spec.a.buffer, spec.a.load_dtype, spec.a.offset));
    a_rs.push_back(c_expr(spec.a.row_stride));
    for (int j = 0; j < s.nb; ++j)
      b[j].push_back(params.add_checked(spec.b[j].buffer, spec.b[j].load_dtype, spec.b[j].offset));
    b_stride.push_back(c_expr(s.b_k_contiguous ? spec.b[0].col_stride : spec.b[0].row_stride));
  }
  std::string pointers =
      "  const " + ctype(first.a.load_dtype) + "* const a_ptr = " + by_problem(a) + ";\n";
  std::string aligned = "dg_aligned16(a_ptr)";
  for (int j = 0; j < s.nb; ++j) {
    const std::string J = std::to_string(j);
    pointers += "  const " + ctype(first.b[j].load_dtype) + "* const b_ptr" + J + " = " +
                by_problem(b[j]) + ";\n";
    aligned += " && dg_aligned16(b_ptr" + J + ")";
  }
  const std::string KT = std::to_string(kKTile);
  const std::string b_smem = s.b_k_contiguous
                                 ? "Bs[" + std::to_string(s.ncp) + "][" + KT + " / 4 + 1]"
                                 : "Bs[" + KT + "][" + std::to_string(s.ncp / 4) + "]";
  // Note [Rank-r split-K on tensor cores]: the warps' mma tiles, their partials stored in pairs.
  const std::string NCP = std::to_string(s.ncp);
  const std::string b_ld = s.b_k_contiguous ? KT + " + 4" : NCP;
  const std::string mma = "  const DgRankMma<" + KT + ", " + NCP + ", " +
                          (s.a_exact ? "true" : "false") + ", " + (s.b_exact ? "true" : "false") +
                          ", " + (s.b_k_contiguous ? "true" : "false") + "> dg_mma(" + KT +
                          " + 4, " + b_ld + ");\n";
  const std::string products = "    dg_mma.multiply(&As[0][0].x, &Bs[0][0].x, acc);\n";
  const std::string store =
      "  {\n"
      "    DG_UNROLL for (int h = 0; h < 2; ++h) {\n"
      "      const long long row = m0 + dg_mma.row() + 8 * h;\n"
      "      if (row < M)\n"
      "        *reinterpret_cast<float2*>(" +
      part + " + ((problem * gridDim.y + blockIdx.y) * M + row) * " + NCP +
      " + dg_mma.col()) = make_float2(acc[2 * h], acc[2 * h + 1]);\n    }\n  }\n";
  const std::string counters = name + "_arrivals";
  return "#include \"dg_rank_mma.cuh\"\n"
         "// Note [Arrival counters]: zero at module load, left zero by every launch.\n"
         "__device__ unsigned " +
         counters + "[" + std::to_string(kTargetCtas * static_cast<int64_t>(problems.size())) +
         "] = {};\n" + kernel_header(name, kThreads, params, ctx) +
         "  const unsigned problem = blockIdx.z;\n"
         "  const long long M = " +
         c_expr(first.M) + ", K = " + c_expr(first.K) + ";\n" + pointers +
         "  const bool aligned = " + aligned + ";\n" +
         "  const long long m0 = (long long)blockIdx.x * " + std::to_string(s.bm) +
         ";\n"
         "  const long long k_tiles = (K + " +
         KT + " - 1) / " + KT +
         ";\n"
         "  const long long per_split = (k_tiles + gridDim.y - 1) / gridDim.y;\n"
         "  const long long k_begin = (long long)blockIdx.y * per_split * " +
         KT +
         ";\n"
         "  const long long k_end = dg_min_ll(K, k_begin + per_split * " +
         KT +
         ");\n"
         "  __shared__ float4 As[" +
         std::to_string(s.bm) + "][" + KT +
         " / 4 + 1];\n"
         "  __shared__ float4 " +
         b_smem +
         ";\n"
         "  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n" +
         mma + "  for (long long k0 = k_begin; k0 < k_end; k0 += " + KT + ") {\n" +
         tile_loads(first, s, by_problem(a_rs), by_problem(b_stride)) + "    __syncthreads();\n" +
         products + "    __syncthreads();\n  }\n" + store + last_block_election(counters) +
         tile_reduction(problems, s, part) + "}\n";
}

}  // namespace

bool rank_gemm_eligible(const GemmKernelSpec& spec) {
  if (!spec.batch.empty() || !spec.k_segments.empty() || spec.acc_dtype != DType::kF32)
    return false;
  if (!spec.N.is_const() || !spec.K.is_const() || spec.b.empty() || spec.b.size() > 2) return false;
  const int64_t N = *spec.N.as_const(), K = *spec.K.as_const();
  if (N <= 0 || K < kMinK || N * static_cast<int64_t>(spec.b.size()) > 64) return false;
  if (!dtype_ok(spec.a) || spec.a.col_stride != SymExpr(1)) return false;
  const int va = vec_of(spec.a.load_dtype);
  if (K % va != 0 || !multiple(spec.a.offset, va) || !multiple(spec.a.row_stride, va)) return false;
  const GemmOperandRef& b0 = spec.b[0];
  const bool k_contiguous = b0.row_stride == SymExpr(1);
  if (!k_contiguous && b0.col_stride != SymExpr(1)) return false;
  for (const GemmOperandRef& b : spec.b) {
    if (!dtype_ok(b) || b.load_dtype != b0.load_dtype) return false;
    if (b.row_stride != b0.row_stride || b.col_stride != b0.col_stride) return false;
    const int vb = vec_of(b.load_dtype);
    const SymExpr& other = k_contiguous ? b.col_stride : b.row_stride;
    if (!multiple(b.offset, vb) || !multiple(other, vb)) return false;
    if (k_contiguous ? K % vb != 0 : N % vb != 0) return false;
  }
  return true;
}

void emit_rank_gemm(LoweringContext& ctx, const std::vector<GemmKernelSpec>& problems,
                    KernelParams params) {
  const GemmKernelSpec& first = problems[0];
  for (const GemmKernelSpec& p : problems)
    if (!rank_gemm_eligible(p) || p.M != first.M || p.N != first.N || p.K != first.K ||
        p.b.size() != first.b.size())
      throw std::logic_error("rank-r GEMM problems that cannot share a kernel");
  const RankShape s = rank_shape(first);
  const int64_t count = static_cast<int64_t>(problems.size());
  const SymExpr splits = split_count(first.M, s);
  BufferRef part =
      ctx.workspace(SymExpr(count) * splits * first.M * SymExpr(s.ncp * 4),
                    "rank-r partials, f32[" + std::to_string(count) + ", " + splits.to_string() +
                        ", " + first.M.to_string() + ", " + std::to_string(s.ncp) + "]");
  std::string summary;
  std::vector<int> nodes;
  for (const GemmKernelSpec& spec : problems) {
    nodes.insert(nodes.end(), spec.nodes.begin(), spec.nodes.end());
    summary += (summary.empty() ? "" : " | ") + spec.summary;
  }
  const std::string what = count > 1 ? "grouped_" + first.what : first.what;

  // One kernel: partial products, blockIdx = (row tile, K split, problem); the last CTA of
  // each row tile sums them and runs the epilogue (Note [Last block reduces]).
  const std::string pp = params.add(part, DType::kF32, true);
  KernelLaunch k;
  k.name = ctx.kernel_name(what + "_splitk");
  k.summary = summary + " [rank-r split-K " + std::to_string(s.bm) + "x" + std::to_string(s.ncp) +
              "x" + std::to_string(kKTile) +
              ", K split by M at launch, partials summed in split order by the last CTA]";
  k.grid = {ceildiv(first.M, SymExpr(s.bm)), splits, SymExpr(count)};
  k.block = {kThreads, 1, 1};
  k.nodes = nodes;  // the products' FLOPs are counted here (Note [Kernel cost model])
  k.split_terms = s.split_terms();  // Note [Rank-r split-K on tensor cores]
  const std::string src = split_k_source(ctx, problems, s, params, pp, k.name);
  k.buffers = params.buffers();
  k.checked_operands = params.checked_operands();
  ctx.add_kernel(std::move(k), src);
}

}  // namespace dg
