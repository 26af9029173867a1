// Pieces of the mma.sync kernels' source (mma_sync_snippets.h).
#include "codegen/mma_sync_snippets.h"

#include "codegen/gemm_snippets.h"

namespace dg {

std::string tile_template(const TileConfig& t) {
  return "DgGemmTile<" + std::to_string(t.bm) + ", " + std::to_string(t.bn) + ", " +
         std::to_string(t.bk) + ", " + std::to_string(t.warps_m) + ", " +
         std::to_string(t.warps_n) + ", " + std::to_string(t.stages) +
         (t.slices_k > 1 ? ", " + std::to_string(t.slices_k) : "") + ">";
}

std::string tc_tag(const TileConfig& t) {
  return "[tensor cores " + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "x" +
         std::to_string(t.bk) + ", " + std::to_string(t.stages) + " stages" +
         (t.slices_k > 1 ? ", K over " + std::to_string(t.slices_k) + " warps" : "");
}

std::string tc_tile_args(bool at, bool bkn, int nb) {
  return std::string("Tile, ") + (at ? "true" : "false") + ", " + (bkn ? "true" : "false") + ", " +
         std::to_string(nb);
}

std::optional<std::vector<int64_t>> rank_staging(const std::vector<EpilogueProduct>& products,
                                                 const TileConfig& t, bool at, bool bkn, int nb) {
  if (products.empty()) return std::nullopt;
  const int64_t a = at ? t.bk * (t.bm + 8) : t.bm * (t.bk + 8);
  const int64_t b = bkn ? t.bk * (t.bn + 8) : t.bn * (t.bk + 8);
  const int64_t floats = int64_t{2} * t.stages * (a + nb * b) / 4;  // bf16 elements to floats
  std::vector<int64_t> offsets;
  int64_t used = 0;
  for (const EpilogueProduct& p : products) {
    if (p.ct != "float" || p.k != products[0].k) return std::nullopt;
    offsets.push_back(used);
    used += t.bm * (p.k + 1) + p.k * (t.bn + 1);
  }
  if (used > floats) return std::nullopt;
  return offsets;
}

std::string scratch_fits(const std::vector<EpilogueProduct>& products,
                         const std::vector<int64_t>& offsets, const std::string& tile_args) {
  const EpilogueProduct& last = products.back();
  const std::string floats = std::to_string(offsets.back()) + " + Tile::BM * " +
                             std::to_string(last.k + 1) + " + " + std::to_string(last.k) +
                             " * (Tile::BN + 1)";
  return "  static_assert(4 * (" + floats + ") <= 2 * Tile::kStages * DgGemmStageCopies<" +
         tile_args + ">::kStage, \"the staged rank-r operands fit the main loop's stages\");\n";
}

std::string scratch_pointer(const std::string& tile_args) {
  return "  float* const dg_scratch = reinterpret_cast<float*>(dg_gemm_smem<" + tile_args +
         ">());\n";
}

std::string tc_block_setup(const std::string& nb) {
  return "  const long long m0 = (long long)blockIdx.x * Tile::BM;\n"
         "  const long long n0 = (long long)blockIdx.y * Tile::BN;\n"
         "  if (m0 >= M || n0 >= N) return;\n"
         "  float acc[" +
         nb +
         "][Tile::MT][Tile::NT][4];\n"
         "  DG_UNROLL\n  for (int j = 0; j < " +
         nb +
         "; ++j)\n"
         "    DG_UNROLL\n    for (int mt = 0; mt < Tile::MT; ++mt)\n"
         "      DG_UNROLL\n      for (int nt = 0; nt < Tile::NT; ++nt)\n"
         "        DG_UNROLL\n        for (int i = 0; i < 4; ++i) acc[j][mt][nt][i] = 0.0f;\n";
}

std::string tc_mainloop(const std::string& nb, bool at, bool bkn, const std::string& a,
                        const std::string& lda, const std::string& b, const std::string& ldb,
                        const std::string& K, bool aligned_only) {
  return "  {\n    const dg_bf16* const b[" + nb + "] = {" + b + "};\n" +
         "    dg_gemm_mainloop<Tile, " + (at ? "true" : "false") + ", " + (bkn ? "true" : "false") +
         ", " + nb + (aligned_only ? ", true" : "") + ">(acc, " + a + ", " + lda + ", b, " + ldb +
         ", m0, M, n0, N, 0, " + K + ");\n  }\n";
}

std::string tc_sum_slices(const std::string& nb, const std::string& tile_args) {
  return "  float dg_sum[" + nb + "][Tile::Epilogue::MT][Tile::Epilogue::NT][4];\n" +
         "  dg_gemm_sum_slices<" + tile_args + ">(acc, dg_sum);\n";
}

std::string epilogue_call(const GemmKernelSpec& spec, KernelParams& params, bool staged,
                          const std::string& epi, bool pair) {
  const std::string nb = std::to_string(spec.b.size());
  const std::string stores = epilogue_stores(spec, params, pair);
  if (!staged)
    return stores + "  dg_gemm_epilogue<Tile::Epilogue, " + nb + ">(dg_sum, m0, M, n0, N, " + epi +
           ", dg_stores);\n";
  return stores + "  dg_gemm_epilogue_rank<Tile::Epilogue, " + nb + ", " +
         std::to_string(spec.products.size()) + ", " + std::to_string(spec.products[0].k) +
         ">(dg_sum, m0, M, n0, N, dg_rank_at, " + epi + ", dg_stores);\n";
}

}  // namespace dg
