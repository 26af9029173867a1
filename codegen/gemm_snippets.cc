// Pieces of kernel source and launch records shared by the GEMM emitters (gemm_snippets.h).
#include "codegen/gemm_snippets.h"

#include <algorithm>
#include <optional>

#include "codegen/epilogue_operands.h"

namespace dg {

std::string epilogue_lambda(const GemmKernelSpec& spec, const std::string& acc,
                            const std::string& name, bool staged) {
  // The products' values at (row, col), first in the body: from the staged registers
  // (dg_gemm_epilogue_rank passes them) or read from global memory.
  std::string accessors, values;
  for (size_t i = 0; i < spec.products.size(); ++i) {
    const EpilogueProduct& p = spec.products[i];
    const std::string k = std::to_string(p.k);
    if (staged) {
      values += "    const float " + p.name + " = dg_rank[" + std::to_string(i) + "];\n";
      continue;
    }
    accessors += "  const auto " + p.name + "_t = dg_rank_rows<" + p.ct + ", " + k + ">(" + p.t +
                 ");\n  const auto " + p.name + "_w = dg_rank_cols<" + p.ct + ", " + k + ", " +
                 (p.linear_weight ? "true" : "false") + ">(" + p.w + ", " +
                 (p.linear_weight ? "0" : p.w_ld) + ");\n";
    values += "    const " + p.ct + " " + p.name + " = dg_rank_product<" + p.ct + ", " + k + ">(" +
              p.name + "_t, row, " + p.name + "_w, col);\n";
  }
  std::string s = accessors + "  auto " + name + " = [&](long long row, int col, " + acc + " acc0";
  if (spec.b.size() == 2) s += ", " + acc + " acc1";
  if (staged) s += ", const float (&dg_rank)[" + std::to_string(spec.products.size()) + "]";
  return s + ", const auto& dg_st) {\n" + values + spec.epilogue + "  };\n";
}

namespace {
// DgPairBits's types (codegen/device/dg_store.cuh); others are stored element by element.
bool pairable(const EpilogueStore& s) {
  return s.dtype == DType::kBF16 || s.dtype == DType::kF16 || s.dtype == DType::kF32;
}
}  // namespace

bool pairs_outputs(const GemmKernelSpec& spec) {
  const std::optional<int64_t> n = spec.N.as_const();
  if (!n || *n % 2 != 0) return false;
  return std::any_of(spec.stores.begin(), spec.stores.end(), pairable);
}

std::string epilogue_stores(const GemmKernelSpec& spec, KernelParams& params, bool pair) {
  if (!pair || !pairs_outputs(spec))
    return epilogue_io_declaration(spec, params, "DgDirectStores", false);
  for (const EpilogueStore& s : spec.stores)
    if (pairable(s)) params.check_paired_output(s.buffer, s.dtype);
  return epilogue_io_declaration(spec, params,
                                 "DgPairs<" + std::to_string(spec.stores.size()) + ">", true);
}

std::string rank_staging_code(const std::vector<EpilogueProduct>& products,
                              const std::vector<int64_t>& offsets) {
  std::string s;
  for (size_t i = 0; i < products.size(); ++i) {
    const EpilogueProduct& p = products[i];
    const std::string k = std::to_string(p.k), k1 = std::to_string(p.k + 1);
    s += "  {  // " + p.name + ": the block's rows of U and columns of B\n";
    s += "    float* const u = dg_scratch + " + std::to_string(offsets[i]) + ";\n";
    s += "    for (int e = threadIdx.x; e < Tile::BM * " + k + "; e += Tile::kThreads) {\n";
    s += "      const int r = e / " + k + ", j = e % " + k + ";\n";
    s += "      u[r * " + k1 + " + j] = m0 + r < M ? dg_convert<float>(" + p.t + "[(m0 + r) * " +
         k + " + j]) : 0.0f;\n    }\n";
    s += "    float* const w = u + Tile::BM * " + k1 + ";\n";
    s += "    for (int e = threadIdx.x; e < " + k + " * Tile::BN; e += Tile::kThreads) {\n";
    // Consecutive threads read consecutive elements of w.
    s += p.linear_weight ? "      const int c = e / " + k + ", j = e % " + k + ";\n"
                         : "      const int j = e / Tile::BN, c = e % Tile::BN;\n";
    const std::string w_at =
        p.linear_weight ? "(n0 + c) * " + k + " + j" : "j * " + p.w_ld + " + n0 + c";
    s += "      w[j * (Tile::BN + 1) + c] = n0 + c < N ? dg_convert<float>(" + p.w + "[" + w_at +
         "]) : 0.0f;\n    }\n  }\n";
  }
  s += "  __syncthreads();\n  const float* const dg_rank_at[" + std::to_string(products.size()) +
       "] = {";
  for (size_t i = 0; i < offsets.size(); ++i)
    s += (i ? ", " : "") + std::string("dg_scratch + ") + std::to_string(offsets[i]);
  return s + "};\n";
}

std::string kernel_header(const std::string& name, int threads, const KernelParams& params,
                          const LoweringContext& ctx) {
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(threads) + ") " + name +
         "(" + params.declaration() + ctx.symbol_params() + ") {\n";
}

std::string by_problem(const std::vector<std::string>& values) {
  std::string s = values.back();
  for (size_t p = values.size() - 1; p-- > 0;)
    if (values[p] != values.back())
      s = "problem == " + std::to_string(p) + " ? " + values[p] + " : " + s;
  return s == values.back() ? s : "(" + s + ")";
}

namespace {

// `code` indented by two more spaces.
std::string indented(const std::string& code) {
  std::string out;
  for (size_t at = 0; at < code.size();) {
    size_t end = code.find('\n', at);
    end = end == std::string::npos ? code.size() : end + 1;
    out += "  " + code.substr(at, end - at);
    at = end;
  }
  return out;
}

}  // namespace

std::string branch_by_problem(const std::vector<std::string>& code) {
  std::string s;
  for (size_t p = 0; p < code.size(); ++p) {
    s += p == 0                ? "  if (problem == 0) {\n"
         : p + 1 < code.size() ? "  } else if (problem == " + std::to_string(p) + ") {\n"
                               : "  } else {\n";
    s += indented(code[p]);
  }
  return s + "  }\n";
}

std::string variant_suffix(const TileConfig& t) {
  return "_tile" + std::to_string(t.bm) + "x" + std::to_string(t.bn);
}

std::string range_tag(const std::vector<TileVariant>& variants, size_t v) {
  return variants.size() == 1 ? "" : ", " + variant_range_text(variants[v]);
}

KernelLaunch variant_launch(const std::string& base, const std::vector<TileVariant>& variants,
                            size_t v, const SymExpr& M, const SymExpr& N, const SymExpr& z,
                            int threads) {
  const TileConfig& t = variants[v].tile;
  KernelLaunch launch;
  launch.name = v == 0 ? base : base + variant_suffix(t);
  launch.variant = static_cast<int>(v);
  if (variants.size() > 1) launch.runs = variant_selector(M, variants[v]);
  launch.grid = {ceildiv(M, SymExpr(t.bm)), ceildiv(N, SymExpr(t.bn)), z * launch.runs};
  launch.block = {threads, 1, 1};
  return launch;
}

}  // namespace dg
