#include "codegen/lowering.h"

#include "codegen/c_expr.h"
#include "codegen/kernel_cost.h"

namespace dg {

LoweringContext::LoweringContext(const Graph& g, const CodegenOptions& options)
    : g_(g), options_(options) {
  plan_.symbols = g.symbols;
  plan_.workspace_bytes = SymExpr(0);
}

BufferRef LoweringContext::workspace(const SymExpr& bytes, const std::string& what) {
  SymExpr aligned = floordiv(bytes + SymExpr(255), SymExpr(256)) * SymExpr(256);
  plan_.workspace.push_back({bytes, plan_.workspace_bytes, what});
  plan_.workspace_bytes = plan_.workspace_bytes + aligned;
  return {BufferRef::kWorkspace, static_cast<int>(plan_.workspace.size() - 1)};
}

std::string LoweringContext::kernel_name(const std::string& what) {
  return "k" + std::to_string(kernel_count_++) + "_" + what;
}

std::string LoweringContext::symbol_params() const {
  std::string s;
  for (const SymExpr& sym : g_.symbols) s += ", long long " + symbol_param(sym);
  return s;
}

void LoweringContext::require_positive(const SymExpr& value, const std::string& message) {
  if (value.bounds().lo >= 1) return;  // provably fine for every binding
  plan_.requirements.push_back({value, message});
}

void LoweringContext::add_kernel(KernelLaunch launch, const std::string& source) {
  if (launch.nodes.empty()) launch.nodes = current_nodes_;
  auto tensor_bytes = [&](ValueId v) {
    const TensorType& t = g_.tensor(v);
    return t.numel() * SymExpr(dtype_size(t.dtype));
  };
  compute_kernel_cost(
      g_,
      [&](BufferRef b) -> SymExpr {
        switch (b.kind) {
          case BufferRef::kInput:
            return tensor_bytes(g_.inputs.at(b.index));
          case BufferRef::kOutput:
            return tensor_bytes(g_.outputs.at(b.index));
          case BufferRef::kWorkspace:
            return plan_.workspace.at(b.index).bytes;
        }
        return SymExpr(0);
      },
      [&](ValueId v) -> std::optional<BufferRef> {
        auto it = buffer_of_.find(v);
        if (it == buffer_of_.end()) return std::nullopt;
        return it->second;
      },
      &launch);
  (launch.fallback ? fallback_body_ : body_) +=
      "// " + launch.summary + "\n" + source + "\nDG_EMU_ENTRY(" + launch.name + ")\n\n";
  plan_.kernels.push_back(std::move(launch));
}

size_t launch_sites(const KernelPlan& plan) {
  size_t n = 0;
  for (const KernelLaunch& k : plan.kernels) n += k.variant == 0;
  return n;
}

bool LoweringContext::has_tensor_maps() const {
  for (const KernelLaunch& k : plan_.kernels)
    if (!k.tensor_maps.empty()) return true;
  return false;
}

KernelPlan LoweringContext::finish(const std::string& prelude) {
  plan_.source = prelude + body_;
  if (!fallback_body_.empty()) plan_.fallback_source = prelude + fallback_body_;
  return std::move(plan_);
}

std::string ctype(DType t) { return std::string(dtype_c_type(t)); }

std::string compute_ctype(DType t) {
  switch (t) {
    case DType::kF64:
      return "double";
    case DType::kI64:
    case DType::kI32:
      return "long long";
    case DType::kBool:
      return "bool";
    default:
      return "float";
  }
}

std::vector<SymExpr> broadcast_strides(const std::vector<SymExpr>& in_shape,
                                       const std::vector<SymExpr>& out_shape) {
  std::vector<SymExpr> contiguous = TensorType{DType::kF32, in_shape}.contiguous_strides();
  std::vector<SymExpr> strides(out_shape.size(), SymExpr(0));
  size_t lead = out_shape.size() - in_shape.size();
  for (size_t d = 0; d < in_shape.size(); ++d) {
    bool broadcast = in_shape[d] == SymExpr(1) && out_shape[lead + d] != SymExpr(1);
    strides[lead + d] = broadcast ? SymExpr(0) : contiguous[d];
  }
  return strides;
}

std::string offset_expr(const std::vector<SymExpr>& strides, const SymExpr& base,
                        const std::string& var) {
  std::string s = c_expr(base);
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] == SymExpr(0)) continue;
    s += " + " + var + std::to_string(d) + " * " + c_expr(strides[d]);
  }
  return s;
}

std::string unravel(const std::vector<SymExpr>& shape, const std::string& linear,
                    const std::string& var) {
  if (shape.empty()) return "";
  std::string rest = var + "_rest";
  std::string s = "    long long " + rest + " = " + linear + ";\n";
  for (size_t d = shape.size(); d-- > 1;) {
    std::string dim = c_expr(shape[d]);
    s += "    const long long " + var + std::to_string(d) + " = " + rest + " % " + dim + "; " +
         rest + " /= " + dim + ";\n";
  }
  s += "    const long long " + var + "0 = " + rest + ";\n";
  return s;
}

std::array<SymExpr, 3> grid_for(const SymExpr& n, int block) {
  // Grid-stride loops: at most 65535 blocks, enough to fill any GPU several times over.
  return {min(ceildiv(n, SymExpr(block)), SymExpr(65535)), SymExpr(1), SymExpr(1)};
}

}  // namespace dg
