#include "runtime/host_run.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "runtime/reference/reference_eval.h"

namespace dg {

namespace {

dg_tensor to_arg(const HostTensor& t, bool sym_int) {
  dg_tensor a{};
  if (sym_int) {
    a.rank = -1;
    a.shape[0] = t.get_int(0);
    return a;
  }
  a.data = const_cast<uint8_t*>(t.bytes.data());
  a.rank = t.rank();
  a.dtype = static_cast<int32_t>(t.dtype);
  for (int d = 0; d < t.rank(); ++d) a.shape[d] = t.shape[d];
  return a;
}

// The exclusive upper bound for the values of integer input `in`: the extent of the dim it
// indexes, when it is used as an index.
int64_t index_bound(const Graph& g, ValueId in, const std::map<std::string, int64_t>& binding) {
  for (const Node& n : g.nodes) {
    if ((n.op == OpKind::kExpertOffsets || n.op == OpKind::kExpertOrder) && n.inputs[0] == in)
      return n.attrs.get_int("num_experts").value_or(8);  // expert ids, in [0, num_experts)
    if (op_info(n.op).category != OpCategory::kIndex || n.inputs.size() < 2 || n.inputs[1] != in)
      continue;
    const TensorType& x = g.tensor(n.inputs[0]);
    int64_t d = n.attrs.get_int("dim").value_or(0);
    if (d < 0) d += x.rank();
    if (auto v = x.shape.at(d).evaluate(binding)) return *v;
  }
  return 8;
}

// The largest finite |value| of `t` (0 when it has none).
double largest_finite_magnitude(const HostTensor& t) {
  double largest = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    if (std::isfinite(v)) largest = std::max(largest, std::fabs(v));
  }
  return largest;
}

}  // namespace

Result<std::vector<HostTensor>> make_random_inputs(const Graph& g,
                                                   const std::map<std::string, int64_t>& binding,
                                                   uint64_t seed) {
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value& v = g.value(g.inputs[i]);
    if (v.kind == ValueKind::kSymInt) {
      auto value = v.sym_value.evaluate(binding);
      if (!value) return Status::error("no value bound for " + v.sym_value.to_string());
      inputs.push_back(make_sym_int(*value));
      continue;
    }
    std::vector<int64_t> shape;
    for (const SymExpr& d : v.type.shape) {
      auto value = d.evaluate(binding);
      if (!value)
        return Status::error("input " + std::to_string(i) + ": no value for dim " + d.to_string());
      shape.push_back(*value);
    }
    if (dtype_is_float(v.type.dtype)) {
      inputs.push_back(random_tensor(v.type.dtype, shape, seed + i));
    } else {
      int64_t hi = v.type.dtype == DType::kBool ? 2 : index_bound(g, g.inputs[i], binding);
      inputs.push_back(random_tensor(v.type.dtype, shape, seed + i, 0, static_cast<double>(hi)));
    }
  }
  return inputs;
}

Result<std::vector<HostTensor>> run_on_host(const Executable& exe,
                                            const std::vector<HostTensor>& inputs,
                                            const HostRunOptions& options) {
  if (exe.on_gpu() && options.cuda_device < 0)
    return Status::error("run_on_host needs a host executable");
  const Graph& g = exe.graph();
  auto place = [&](dg_tensor& a, bool host) {
    if (options.cuda_device < 0 || host) return;
    a.device_type = DG_DEVICE_CUDA;
    a.device_index = options.cuda_device;
  };
  std::vector<dg_tensor> in_args;
  for (size_t i = 0; i < inputs.size() && i < g.inputs.size(); ++i) {
    in_args.push_back(to_arg(inputs[i], g.value(g.inputs[i]).kind == ValueKind::kSymInt));
    bool host = false;
    for (int k : options.host_scalars) host |= k == static_cast<int>(i);
    place(in_args.back(), host);
  }
  std::vector<dg_tensor> out_args(g.outputs.size());
  size_t workspace_bytes = 0;
  Status s = exe.prepare(in_args.data(), static_cast<int>(in_args.size()), out_args.data(),
                         static_cast<int>(out_args.size()), &workspace_bytes);
  if (!s.ok()) return s;
  std::vector<HostTensor> outputs;
  for (const dg_tensor& o : out_args) {
    std::vector<int64_t> shape(o.shape, o.shape + o.rank);
    outputs.push_back(make_tensor(static_cast<DType>(o.dtype), shape));
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    out_args[j].data = outputs[j].bytes.data();
    place(out_args[j], false);
  }
  // 256-byte aligned like a CUDA allocation.
  std::unique_ptr<void, decltype(&std::free)> workspace(
      workspace_bytes ? std::aligned_alloc(256, (workspace_bytes + 255) / 256 * 256) : nullptr,
      &std::free);
  s = exe.launch(in_args.data(), static_cast<int>(in_args.size()), out_args.data(),
                 static_cast<int>(out_args.size()), workspace.get(), options.stream);
  if (!s.ok()) return s;
  return outputs;
}

DType least_precise_float(const Graph& g) {
  DType loosest = DType::kF32;
  for (const Value& v : g.values)
    if (v.kind == ValueKind::kTensor && dtype_is_float(v.type.dtype) &&
        default_tolerance(v.type.dtype).rtol > default_tolerance(loosest).rtol)
      loosest = v.type.dtype;
  return loosest;
}

CompareResult compare_to_reference(const HostTensor& actual, const HostTensor& expected,
                                   ToleranceMode mode, double tolerance_scale, DType graph_dtype) {
  // Note [Default tolerances] in runtime/reference/host_tensor.h.
  Tolerance tol = default_tolerance(expected.dtype);
  double atol_scale = 1.0;  // Note [Tolerance at the tensor's scale]
  if (mode == ToleranceMode::kTensorScale && dtype_is_float(expected.dtype)) {
    if (default_tolerance(graph_dtype).rtol > tol.rtol) tol = default_tolerance(graph_dtype);
    atol_scale = std::max(atol_scale, largest_finite_magnitude(expected));
  }
  return compare(actual, expected, tol.rtol * tolerance_scale,
                 tol.atol * tolerance_scale * atol_scale);
}

Result<std::vector<OutputCheck>> check_against_reference(const Graph& g, const Executable& exe,
                                                         const std::vector<HostTensor>& inputs,
                                                         double tolerance_scale,
                                                         const HostRunOptions& options,
                                                         ToleranceMode mode) {
  auto actual = run_on_host(exe, inputs, options);
  if (!actual.ok()) return actual.status();
  RefResult expected = reference_eval(g, inputs);
  if (!expected.ok()) return Status::error("reference: " + expected.error);
  const DType graph_dtype = least_precise_float(g);
  std::vector<OutputCheck> checks;
  for (size_t j = 0; j < expected.outputs.size(); ++j) {
    const HostTensor& e = expected.outputs[j];
    CompareResult c =
        compare_to_reference(actual.value()[j], e, mode, tolerance_scale, graph_dtype);
    checks.push_back({"output " + std::to_string(j) + " " + e.to_string(), c.max_abs_err,
                      c.max_rel_err, largest_finite_magnitude(e), c.ok, c.message});
  }
  return checks;
}

}  // namespace dg
