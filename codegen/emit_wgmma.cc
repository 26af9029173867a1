// Note [sm_90a GEMMs]
// On sm_90a a tensor-core GEMM whose A operand is K-major (activations) and whose B operands are
// all K-major (a linear layer's weights: x @ W^T) or all N-major (the same weights in the
// backward's dgrad, dy @ W) runs the warp-specialized main loop of
// codegen/device/dg_gemm_sm90.cuh: TMA boxes into a ring of 128-byte-swizzled stages, wgmma on
// them (imm-trans-b = 1 for N-major B), the epilogue unchanged in meaning on the wgmma
// accumulator layout (dg_wgmma_epilogue calls the same lambda the mma.sync kernels call).
// Rank-r products (the LoRA updates) are staged (Note [Staged rank-r epilogue]): the producer
// warpgroup's idle warps copy the block's U rows and B columns into shared memory beside the
// main loop (Note [Rank-r staging beside the main loop] in dg_gemm_sm90.cuh) as bf16 splits, and
// dg_wgmma_epilogue_rank runs the products as wgmmas (Note [Rank-r products on tensor cores]). Read
// from global memory per element instead, the products made the seed forward's wgmma GEMMs
// issue-bound: at s = 4096 `dyngen plan` put the gate/up GEMM at 83.4 us against 61.3 us on
// mma.sync, the down GEMM at 78.4 against 38.2. One compile holds, by the runtime M (Note [Tile
// choice] in tile_choice.cc):
// - for two B operands, 128 x 128 from the M where its tiles fill one wave (Note [Wide gate/up
//   tile]);
// - 128 x BN wgmma (two consumer warpgroups) from the M where its tiles fill one wave of
//   kFillCtas blocks: a wgmma block computes a tile at the tensor cores' full rate, so one full
//   wave of large tiles beats two of small ones (mma.sync's rule is two waves because its small
//   tile runs at a fraction of that rate);
// - 64 x BN wgmma (one consumer warpgroup) from the M where those fill one wave;
// - below that, the mma.sync variants of tile_variants: too few tiles for the large ones.
// BN is 128, or 64 for N <= 64 and for two B operands on the 128-row tile below the wide one;
// stages kMaxStages, or fewer where shared memory ends.
// Each wgmma kernel takes a tensor map per operand (Note [Tensor maps] in kernel_plan.h); the
// GEMM's fallback kernel (Note [GEMM fallbacks]) runs a call whose maps the driver refuses. A
// GEMM over K segments (Note [K-concatenated GEMMs]: the backward's dx from gate and
// up) takes a map per segment and operand; the producer walks the segments in turn. On mma.sync
// stay: GEMMs with N or K below 128 (wgmma_eligible), an M-major A (the weight gradients, which
// have their own kernels), and products that cannot be staged (not f32, of different ranks, or
// too large for shared memory beside two stages).
#include <algorithm>

#include "codegen/c_expr.h"
#include "codegen/gemm_snippets.h"
#include "codegen/mma_sync_gemm.h"
#include "codegen/tc_layout.h"
#include "codegen/wgmma_gemm.h"

namespace dg {

namespace {

// Shared memory per block on sm_90 (228 KB per SM, 227 KB per block, CUDA C++ Programming
// Guide, "Compute Capability 9.0"); four stages keep the copies ahead of the wgmmas (CUTLASS's
// sm90 collective builders pick 4-7 for bf16 tiles of this size).
constexpr int64_t kMaxSmemBytes = 227 * 1024;
constexpr int kMaxStages = 4;
constexpr int64_t kMinN = 128, kMinK = 128;  // wgmma_eligible

struct WgmmaTile {
  int bm, bn, stages, nb;
  bool b_mn_major = false;  // B stored [K][N] (Note [Warp-specialized main loop])
  int rank_products = 0;    // staged rank-r products, each of rank_steps k16 steps
  int rank_steps = 0;
  int threads() const { return 128 * (bm / 64 + 1); }
  int64_t stage_bytes() const { return int64_t{2} * 64 * (bm + nb * bn); }
  // Tile::kSmemBytes: the stages, two barriers each and the `staged` barrier.
  int64_t loop_bytes() const { return stages * stage_bytes() + 16 * stages + 8; }
  // DgWgmmaRank::kOffset + kBytes: the products' k tiles from the next 1024-byte boundary.
  int smem_bytes() const {
    if (rank_products == 0) return static_cast<int>(loop_bytes());
    const int64_t k_tiles = (2 * rank_steps * rank_products + 3) / 4;
    return static_cast<int>((loop_bytes() + 1023) / 1024 * 1024 + k_tiles * (bm + bn) * 128);
  }
  // The device's name of that layout, DgWgmmaRank<Tile, products, steps>.
  std::string rank_type() const {
    return "DgWgmmaRank<Tile, " + std::to_string(rank_products) + ", " +
           std::to_string(rank_steps) + ">";
  }
};

// Note [Wide gate/up tile]
// The gate/up GEMM (two B operands sharing A) on a 128 x 128 tile instead of 128 x 64, counted
// per SM and clock on the H100/H200 (4096 dense bf16 FLOP; 128 bytes of shared memory): an
// m64nNk16 takes N / 2 clocks and reads 2 KB of A and 32 N bytes of B, and TMA writes each
// stage's (128 + 2 BN) rows of 128 bytes once per k tile of 128 x 2 BN x 64 x 2 / 4096 clocks.
// - 128 x 64 as two n64 wgmmas: (2 + 2) KB twice in 64 clocks, 128 B/clk, already the limit;
//   with TMA's 64 B/clk (if its writes share the bandwidth) 192, at most 2/3 of the tensor rate.
// - 128 x 64 as one n128 over both B tiles (Note [Stacked B operands] in dg_gemm_sm90.cuh, used
//   by every tile now): (2 + 4) KB in 64 clocks, 96 B/clk; with TMA's 64, 160 (80%).
// - 128 x 96, one n192: (2 + 6) KB in 96 clocks, 85 B/clk; with TMA's 53, 139 (92%).
// - 128 x 128, one n256: (2 + 8) KB in 128 clocks, 80 B/clk; with TMA's 48, 128: the limit.
// So 128 x 128: the fewest shared-memory bytes per FLOP, and 25% fewer L2 bytes than 128 x 64
// (48 against 64 B/clk per SM: 11.6 against 15.5 TB/s on 132 SMs at 1.83 GHz, no multicast).
// Its 128 accumulators a consumer thread exceed the 168 registers 384 threads get at entry (as
// two n128 it spilled 60 bytes): the producer gives registers back and the consumers take 232
// (Note [Warpgroup register counts] in dg_wgmma_sm90.cuh). Shared memory: 4 stages of 48 KB
// and the seed's two staged rank-16 products (one 64-wide k tile of 128 + 128 rows, Note [Rank-r
// products on tensor cores]) are 230,400 bytes of the 232,448. It halves the column tiles, so it
// starts where they fill one wave (the seed's N = 1024: 8 column tiles, M >= 2049); 128 x 64 stays
// below, which fills a wave twice as soon. `wide`: that tile.
WgmmaTile wgmma_tile(int bm, int64_t N, const GemmKernelSpec& spec, bool wide = false) {
  const int nb = static_cast<int>(spec.b.size());
  const int bn = wide || (N > 64 && !(nb == 2 && bm == 128)) ? 128 : 64;
  WgmmaTile t{bm, bn, kMaxStages, nb};
  t.b_mn_major = tc_transposes(spec).bkn;
  if (!spec.products.empty()) {  // wgmma_eligible: all of one rank
    t.rank_products = static_cast<int>(spec.products.size());
    t.rank_steps = static_cast<int>((spec.products[0].k + 15) / 16);
  }
  while (t.stages > 2 && t.smem_bytes() > kMaxSmemBytes) --t.stages;
  return t;
}

std::string wgmma_tag(const WgmmaTile& t) {
  return "[wgmma " + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "x64, " +
         std::to_string(t.stages) + " stages" + (t.b_mn_major ? ", B N-major" : "");
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The first M at which row tiles of `bm` rows and `col_tiles` column tiles fill one wave.
int64_t one_wave_from(int bm, int64_t col_tiles, int64_t wave_ctas) {
  return bm * (ceil_div(wave_ctas, col_tiles) - 1) + 1;
}

// The variants of `all` restricted to M in [lo, hi], the empty ones dropped.
std::vector<TileVariant> clipped(const std::vector<TileVariant>& all, int64_t lo, int64_t hi) {
  std::vector<TileVariant> out;
  for (TileVariant v : all) {
    v.m_lo = std::max(v.m_lo, lo);
    v.m_hi = std::min(v.m_hi, hi);
    if (v.m_lo <= v.m_hi) out.push_back(v);
  }
  return out;
}

int param_index(const KernelParams& params, BufferRef buffer) {
  const std::vector<BufferRef>& b = params.buffers();
  return static_cast<int>(std::find(b.begin(), b.end(), buffer) - b.begin());
}

std::string map_ref(size_t i) { return "&dg_map" + std::to_string(i); }

// The main loop's calls (Note [Warp-specialized main loop]) around the consumers' `epilogue`, the
// maps of segment g being dg_map<(1 + nb) g + j> (A then each B): the producer's and the
// consumers' paths apart to the kernel's end. `staging` (copies by the stagers, Note [Rank-r
// staging beside the main loop]) runs in the producer warpgroup beside the main loop, and the
// consumers wait for it before the epilogue.
std::string mainloop_code(const std::vector<GemmKSegment>& segments, int nb,
                          const std::string& staging, const std::string& epilogue) {
  const std::string NB = std::to_string(nb), NSEG = std::to_string(segments.size());
  std::string a_maps, b_maps, seg_k;
  for (size_t g = 0; g < segments.size(); ++g) {
    const size_t first = g * (1 + nb);
    const std::string sep = g ? ", " : "";
    a_maps += sep + map_ref(first);
    std::string row;
    for (int j = 0; j < nb; ++j) row += (j ? ", " : "") + map_ref(first + 1 + j);
    b_maps += sep + "{" + row + "}";
    seg_k += sep + c_expr(segments[g].K);
  }
  return "  const DgTensorMap* const a_maps[" + NSEG + "] = {" + a_maps +
         "};\n  const DgTensorMap* const b_maps[" + NSEG + "][" + NB + "] = {" + b_maps +
         "};\n  const long long seg_k[" + NSEG + "] = {" + seg_k +
         "};\n  dg_wgmma_init_barriers<Tile>();\n"
         "  if (dg_wgmma_is_producer<Tile>()) {\n"
         "    dg_wgmma_mainloop_producer<Tile, " +
         NSEG + ">(a_maps, b_maps, seg_k, m0, n0);\n" +
         (staging.empty() ? ""
                          : "    if (dg_wgmma_is_stager<Tile>()) {\n"
                            "      const int dg_stager = dg_wgmma_stager_index<Tile>();\n" +
                                staging + "      dg_wgmma_staged_arrive<Tile>();\n    }\n") +
         "  } else {  // a consumer warpgroup\n"
         "    float acc[" +
         NB +
         "][Tile::BN / 2];\n"
         "    dg_wgmma_mainloop_consumer<Tile>(acc, dg_wgmma_k_tiles<Tile>(seg_k));\n" +
         (staging.empty() ? "" : "    dg_wgmma_staged_wait<Tile>();\n") + epilogue + "  }\n";
}

// The stagers' copies of each product's U rows and W columns as bf16 splits (Note [Rank-r
// products on tensor cores]): A rows of the block's M, B rows of its N, j past the rank zero,
// then the async-proxy fence that lets the consumers' wgmmas read what these generic stores
// wrote (arrive, which follows, orders them for the consumers' wait).
std::string rank_split_staging(const std::vector<EpilogueProduct>& products, const WgmmaTile& t) {
  const std::string KS = std::to_string(t.rank_steps), KP = std::to_string(16 * t.rank_steps);
  std::string s =
      "      unsigned char* const dg_rank_b = dg_rank + " + t.rank_type() + "::kBOffset;\n";
  for (size_t q = 0; q < products.size(); ++q) {
    const EpilogueProduct& p = products[q];
    const std::string k = std::to_string(p.k), Q = std::to_string(q);
    s += "      // " + p.name + ": the block's rows of U and columns of W\n";
    s += "      for (int e = dg_stager; e < Tile::BM * " + KP + "; e += Tile::kStagingThreads) {\n";
    s += "        const int r = e / " + KP + ", j = e % " + KP + ";\n";
    s += "        const float v = m0 + r < M && j < " + k + " ? dg_convert<float>(" + p.t +
         "[(m0 + r) * " + k + " + j]) : 0.0f;\n";
    s += "        dg_wgmma_rank_split<" + KS + ">(dg_rank, Tile::BM, r, " + Q +
         ", j, v);\n      }\n";
    s += "      for (int e = dg_stager; e < " + KP + " * Tile::BN; e += Tile::kStagingThreads) {\n";
    // Consecutive threads read consecutive elements of w.
    s += p.linear_weight ? "        const int c = e / " + KP + ", j = e % " + KP + ";\n"
                         : "        const int j = e / Tile::BN, c = e % Tile::BN;\n";
    const std::string w_at =
        p.linear_weight ? "(n0 + c) * " + k + " + j" : "j * " + p.w_ld + " + n0 + c";
    s += "        const float v = n0 + c < N && j < " + k + " ? dg_convert<float>(" + p.w + "[" +
         w_at + "]) : 0.0f;\n";
    s += "        dg_wgmma_rank_split<" + KS + ">(dg_rank_b, Tile::BN, c, " + Q +
         ", j, v);\n      }\n";
  }
  return s + "      dg_fence_proxy_async();\n";
}

// The kernel: the tensor maps after the pointers, the main loop, the epilogue lambda on every
// accumulator inside [0, M) x [0, N).
std::string wgmma_source(LoweringContext& ctx, GemmKernelSpec& spec, const std::string& name,
                         const WgmmaTile& t, std::vector<TensorMapArg>* maps) {
  const int nb = static_cast<int>(spec.b.size());
  const SymExpr two(2);
  // A map of `rows` rows of `cols` contiguous elements, `ld` elements apart.
  auto map_of = [&](const GemmOperandRef& op, const SymExpr& rows, const SymExpr& cols,
                    const SymExpr& ld, int box_rows) {
    spec.params.add(op.buffer, DType::kBF16, false);
    maps->push_back(
        {param_index(spec.params, op.buffer), op.offset * two, rows, cols, ld * two, box_rows, 64});
  };
  const std::vector<GemmKSegment> segments = k_segments_or_whole(spec);
  // Per segment, its A map then its B maps: dg_map<(1 + NB) g + j>.
  for (const GemmKSegment& seg : segments) {
    map_of(seg.a, spec.M, seg.K, seg.a.row_stride, t.bm);
    for (const GemmOperandRef& b : seg.b) {
      if (t.b_mn_major)
        map_of(b, seg.K, spec.N, b.row_stride, 64);  // boxes of 64 K rows of 64 columns
      else
        map_of(b, spec.N, seg.K, b.col_stride, t.bn);
    }
  }
  std::string map_params;
  for (size_t i = 0; i < maps->size(); ++i)
    map_params += ", const __grid_constant__ DgTensorMap dg_map" + std::to_string(i);
  const std::string NB = std::to_string(nb);
  const bool staged = !spec.products.empty();
  const std::string stores = epilogue_stores(spec, spec.params);
  std::string scratch, staging,
      epilogue = "  dg_wgmma_epilogue<Tile>(acc, m0, M, n0, N, epi, dg_stores);\n";
  if (staged) {  // Note [Rank-r staging beside the main loop], [Rank-r products on tensor cores]
    scratch =
        "  unsigned char* const dg_rank = dg_dynamic_smem() + " + t.rank_type() + "::kOffset;\n";
    staging = rank_split_staging(spec.products, t);
    epilogue = "  dg_wgmma_epilogue_rank<Tile, " + std::to_string(t.rank_products) + ", " +
               std::to_string(t.rank_steps) + ">(acc, m0, M, n0, N, dg_rank, epi, dg_stores);\n";
  }
  // A minimum of one block per SM: ptxas then knows the register count at entry, which setmaxnreg
  // needs (Note [Warpgroup register counts] in dg_wgmma_sm90.cuh).
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(t.threads()) + ", 1) " +
         name + "(" + spec.params.declaration() + map_params + ctx.symbol_params() + ") {\n" +
         "  typedef DgWgmmaTile<" + std::to_string(t.bm) + ", " + std::to_string(t.bn) + ", " +
         std::to_string(t.stages) + ", " + NB + (t.b_mn_major ? ", true" : "") + "> Tile;\n" +
         "  const long long M = " + c_expr(spec.M) + ", N = " + c_expr(spec.N) + ";\n" +
         "  const long long c_base = 0;\n" + epilogue_lambda(spec, "float", "epi", staged) +
         "  const long long m0 = (long long)blockIdx.x * Tile::BM;\n"
         "  const long long n0 = (long long)blockIdx.y * Tile::BN;\n" +
         scratch + mainloop_code(segments, nb, staging, stores + epilogue) + "}\n";
}

// Variant `v` of the GEMM whose first kernel is `base`, for M in [lo, hi].
KernelLaunch site_launch(const std::string& base, const std::string& suffix, int v,
                         const SymExpr& M, int64_t lo, int64_t hi, bool single) {
  KernelLaunch launch;
  launch.name = v == 0 ? base : base + suffix;
  launch.variant = v;
  if (!single) launch.runs = variant_selector(M, TileVariant{TileConfig{}, lo, hi});
  return launch;
}

std::string range_text(int64_t lo, int64_t hi, bool single) {
  return single ? "" : ", " + variant_range_text(TileVariant{TileConfig{}, lo, hi});
}

}  // namespace

bool wgmma_eligible(const GemmKernelSpec& spec) {
  // Narrow or short GEMMs (a LoRA factor's N = 16, K = 64) fill a wave only at tens of thousands
  // of tokens and give the pipeline one or two k tiles: mma.sync's tiles serve them.
  if (*spec.N.as_const() < kMinN || *spec.K.as_const() < kMinK) return false;
  for (const EpilogueProduct& p : spec.products)  // Note [Staged rank-r epilogue]
    if (p.ct != "float" || p.k != spec.products[0].k) return false;
  if (wgmma_tile(128, *spec.N.as_const(), spec).smem_bytes() > kMaxSmemBytes) return false;
  // Every B has the first one's layout (tensor_core_eligible): one main loop serves them all.
  return !tc_transposes(spec).at;
}

void emit_sm90_gemm(LoweringContext& ctx, GemmKernelSpec& spec) {
  const int nb = static_cast<int>(spec.b.size());
  const int64_t N = *spec.N.as_const();
  const Interval m = spec.M.bounds();
  const int64_t lo = std::max<int64_t>(m.lo, 0), hi = m.hi;
  const WgmmaTile big = wgmma_tile(128, N, spec), small = wgmma_tile(64, N, spec);
  const int64_t wave = ctx.options().wave_ctas > 0 ? ctx.options().wave_ctas : kFillCtas;
  const int64_t big_from = std::max(lo, one_wave_from(128, ceil_div(N, big.bn), wave));
  // 64 x BN from where it fills a wave, and never past the 128-row tile's start (for two B
  // operands BN is 128 there, 64 on the 128-row tile, so it could fill a wave later).
  const int64_t small_from =
      std::min(big_from, std::max(lo, one_wave_from(64, ceil_div(N, small.bn), wave)));
  struct Wgmma {
    WgmmaTile tile;
    int64_t lo, hi;
  };
  std::vector<Wgmma> wgmma;
  // Note [Wide gate/up tile]: two B operands take 128 x 128 from where its tiles fill a wave.
  const WgmmaTile wide = wgmma_tile(128, N, spec, true);
  int64_t big_hi = hi;
  if (nb == 2 && N > big.bn && wide.smem_bytes() <= kMaxSmemBytes) {
    const int64_t wide_from = std::max(big_from, one_wave_from(128, ceil_div(N, wide.bn), wave));
    if (wide_from <= hi) {
      wgmma.push_back({wide, wide_from, hi});
      big_hi = wide_from - 1;
    }
  }
  if (big_from <= big_hi) wgmma.push_back({big, big_from, big_hi});
  if (small_from <= std::min(hi, big_from - 1))
    wgmma.push_back({small, small_from, std::min(hi, big_from - 1)});
  const std::vector<TileVariant> mma = tile_variants(spec.M, N, nb);
  const std::vector<TileVariant> below = clipped(mma, lo, small_from - 1);
  const bool single = wgmma.size() + below.size() == 1;

  const std::string base = ctx.kernel_name(spec.what);
  int v = 0;
  for (const Wgmma& w : wgmma) {
    const WgmmaTile& t = w.tile;
    KernelLaunch launch =
        site_launch(base, "_wgmma" + std::to_string(t.bm) + "x" + std::to_string(t.bn), v++, spec.M,
                    w.lo, w.hi, single);
    launch.grid = {ceildiv(spec.M, SymExpr(t.bm)), ceildiv(spec.N, SymExpr(t.bn)), launch.runs};
    launch.block = {t.threads(), 1, 1};
    launch.shared_bytes = t.smem_bytes();
    launch.summary = spec.summary + " " + wgmma_tag(t) +
                     (spec.products.empty() ? "" : ", rank-r operands staged") +
                     range_text(w.lo, w.hi, single) + "]";
    launch.nodes = spec.nodes;
    for (const EpilogueProduct& p : spec.products)  // hi*hi + lo*hi + hi*lo
      launch.epilogue_mma_flops = launch.epilogue_mma_flops + SymExpr(2 * p.k) * spec.M * spec.N;
    if (!spec.products.empty()) launch.epilogue_split_terms = 3;
    std::string src = wgmma_source(ctx, spec, launch.name, t, &launch.tensor_maps);
    launch.buffers = spec.params.buffers();
    launch.aligned_only = true;  // its epilogue's pairs; TMA checks its operands
    for (const CheckedOperand& c : spec.params.checked_operands())
      if (c.epilogue_pairs()) launch.checked_operands.push_back(c);
    ctx.add_kernel(std::move(launch), src);
  }
  // The mma.sync tiles for M below the wgmma range.
  for (const TileVariant& m : below) {
    const TileConfig& t = m.tile;
    KernelLaunch launch =
        site_launch(base, "_tile" + std::to_string(t.bm) + "x" + std::to_string(t.bn), v++, spec.M,
                    m.m_lo, m.m_hi, single);
    launch.grid = {ceildiv(spec.M, SymExpr(t.bm)), ceildiv(spec.N, SymExpr(t.bn)), launch.runs};
    launch.block = {t.threads(), 1, 1};
    emit_mma_sync_kernel(ctx, spec, std::move(launch), t, range_text(m.m_lo, m.m_hi, single));
  }
  // For a call whose tensor maps the driver refuses or whose addresses are off.
  emit_gemm_fallback(ctx, spec, base, v);
}

}  // namespace dg
