#include "runtime/model/eager_baseline.h"

#include <algorithm>
#include <cmath>

#include "codegen/kernel_cost.h"

namespace dg {

namespace {

bool is_view(OpKind op) {
  return op == OpKind::kReshape || op == OpKind::kPermute || op == OpKind::kExpand ||
         op == OpKind::kSlice;
}

bool low_precision(DType t) { return t == DType::kBF16 || t == DType::kF16; }

}  // namespace

double cublas_seconds(double m, double n, double k, double batch, bool bf16, double bytes,
                      const GpuSpec& gpu) {
  double flops = 2 * m * n * k * batch;
  if (flops <= 0) return bytes / gpu.bytes_per_second;
  double tiles = std::ceil(m / 128) * std::ceil(n / 128) * batch;
  double split = 1;
  if (tiles < gpu.sms) split = std::max(1.0, std::min(std::floor(gpu.sms / tiles), k / 256));
  double ctas = tiles * split;
  double utilisation = ctas / (std::ceil(ctas / gpu.sms) * gpu.sms);
  double peak =
      bf16 ? gpu.tensor_flops * kCublasBf16Efficiency : gpu.simt_flops * kCublasF32Efficiency;
  return std::max(flops / (peak * utilisation), bytes / gpu.bytes_per_second);
}

std::optional<EagerEstimate> estimate_eager(const Graph& g,
                                            const std::map<std::string, int64_t>& bindings,
                                            const GpuSpec& gpu, double launch_seconds,
                                            std::string* error) {
  auto eval = [&](const SymExpr& e, double* out) {
    std::optional<int64_t> v = e.evaluate(bindings);
    if (!v) {
      *error = "eager baseline: cannot evaluate " + e.to_string();
      return false;
    }
    *out = static_cast<double>(*v);
    return true;
  };
  auto bytes_of = [&](ValueId id, double* out) {
    const Value& v = g.value(id);
    if (v.kind != ValueKind::kTensor) {
      *out = 0;
      return true;
    }
    if (!eval(v.type.numel(), out)) return false;
    *out *= dtype_size(v.type.dtype);
    return true;
  };
  EagerEstimate est;
  double host = 0, device = 0;  // the two timelines' ends
  for (const Node& node : g.nodes) {
    const TensorType& out = g.tensor(node.output);
    if (node.op == OpKind::kConstant || node.op == OpKind::kSymConstant) {
      double numel = 0;
      if (!eval(out.numel(), &numel)) return std::nullopt;
      if (numel <= 1) continue;  // a Python scalar
    }
    ++est.calls;
    host += kEagerDispatchSeconds;
    if (is_view(node.op)) continue;
    ++est.kernels;
    double bytes = 0, b = 0;
    if (!bytes_of(node.output, &bytes)) return std::nullopt;
    for (ValueId in : node.inputs) {
      if (!bytes_of(in, &b)) return std::nullopt;
      bytes += b;
    }
    double seconds = 0;
    // grouped_mm: eager's torch._grouped_mm, costed as one GEMM [R, K] x [K, N].
    if (op_info(node.op).category == OpCategory::kMatmul || node.op == OpKind::kGroupedMm) {
      const TensorType& a = g.tensor(node.inputs[0]);
      const TensorType& w = g.tensor(node.inputs[node.op == OpKind::kGroupedMm ? 2 : 1]);
      double k = 1, n = 1, m = 1, numel = 0;
      if (!a.shape.empty() && !eval(a.shape.back(), &k)) return std::nullopt;
      if (!out.shape.empty() && !eval(out.shape.back(), &n)) return std::nullopt;
      if (out.shape.size() >= 2 && !eval(out.shape[out.shape.size() - 2], &m)) return std::nullopt;
      if (!eval(out.numel(), &numel)) return std::nullopt;
      double batch = m * n > 0 ? numel / (m * n) : 0;
      seconds = cublas_seconds(m, n, k, batch, low_precision(a.dtype) && low_precision(w.dtype),
                               bytes, gpu);
      est.gemm_seconds += seconds;
    } else {
      double flops = 0;
      if (!eval(node_flops(g, node).flops, &flops)) return std::nullopt;
      seconds = std::max(bytes / gpu.bytes_per_second, flops / gpu.simt_flops);
    }
    est.device_seconds += launch_seconds + seconds;
    device = std::max(device, host) + launch_seconds + seconds;
  }
  est.host_seconds = host;
  est.seconds = std::max(host, device);
  return est;
}

}  // namespace dg
