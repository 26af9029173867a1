#include "runtime/executable.h"

#include <cstdio>
#include <optional>

#include "runtime/compiler.h"

namespace dg {

namespace {
std::string describe_input(int i) { return "input " + std::to_string(i); }

std::string describe_buffer(const BufferRef& b) {
  switch (b.kind) {
    case BufferRef::kInput:
      return describe_input(b.index);
    case BufferRef::kOutput:
      return "output " + std::to_string(b.index);
    case BufferRef::kWorkspace:
      break;
  }
  return "a workspace buffer";
}

// Note [Tensor maps]: the shape program's results per map: offset_bytes, rows, cols,
// row_stride_bytes.
constexpr size_t kResultsPerMap = 4;

// Note [Host scalars]
// Under dynamic=True Dynamo turns Python floats (PEFT's LoRA scaling) into 0-d CPU tensors that
// become graph inputs beside the GPU tensors. A GPU executable takes such a rank-0 host tensor by
// value: prepare() adds a 16-byte slot per scalar after the kernels' workspace, and launch()
// copies the value there on the launch's stream (cuMemcpyHtoDAsync from pageable memory returns
// once the value is staged) before the kernels read it through a device pointer.
constexpr size_t kScalarSlot = 16;
constexpr size_t kScalarAlign = 256;

size_t dtype_bytes(int32_t code) {
  return static_cast<size_t>(dtype_size(static_cast<DType>(code)));
}
}  // namespace

Result<std::shared_ptr<Executable>> Executable::create(Graph graph, KernelPlan plan,
                                                       std::unique_ptr<KernelModule> module,
                                                       std::string target,
                                                       FallbackBuilder build_fallbacks) {
  std::shared_ptr<Executable> e(new Executable());
  e->graph_ = std::move(graph);
  e->plan_ = std::move(plan);
  e->module_ = std::move(module);
  e->target_ = std::move(target);
  e->build_fallbacks_ = std::move(build_fallbacks);
  const Graph& g = e->graph_;

  // Note [Binding symbols]
  // Every symbol must appear as a whole dim of some input (or be a SymInt input); its first
  // occurrence binds it and every other dim, derived expressions included, is checked against
  // the shape program's value. A symbol that only occurs inside an expression (say 2*s) cannot
  // be solved for and makes the graph unsupported.
  for (const SymExpr& sym : e->plan_.symbols) {
    SymbolSource src{-1, -2};
    for (size_t i = 0; i < g.inputs.size() && src.input < 0; ++i) {
      const Value& v = g.value(g.inputs[i]);
      if (v.kind == ValueKind::kSymInt && v.sym_value == sym) src = {static_cast<int>(i), -1};
      for (int d = 0; v.kind == ValueKind::kTensor && d < v.type.rank() && src.input < 0; ++d)
        if (v.type.shape[d] == sym) src = {static_cast<int>(i), d};
    }
    if (src.input < 0)
      return Status::error("symbol " + sym.symbol_name() +
                           " is not a whole dimension of any input, so it cannot be bound");
    e->sources_.push_back(src);
  }

  std::vector<SymExpr> exprs;
  e->input_dims_at_ = exprs.size();
  for (ValueId in : g.inputs) {
    const Value& v = g.value(in);
    if (v.kind == ValueKind::kSymInt)
      exprs.push_back(v.sym_value);
    else
      exprs.insert(exprs.end(), v.type.shape.begin(), v.type.shape.end());
  }
  e->output_dims_at_ = exprs.size();
  for (ValueId out : g.outputs)
    exprs.insert(exprs.end(), g.tensor(out).shape.begin(), g.tensor(out).shape.end());
  e->workspace_at_ = exprs.size();
  for (const WorkspaceSlot& w : e->plan_.workspace) exprs.push_back(w.offset);
  exprs.push_back(e->plan_.workspace_bytes);
  e->requirements_at_ = exprs.size();
  for (const RuntimeRequirement& r : e->plan_.requirements) exprs.push_back(r.value);
  e->grids_at_ = exprs.size();
  for (const KernelLaunch& k : e->plan_.kernels)
    exprs.insert(exprs.end(), k.grid.begin(), k.grid.end());
  e->checked_at_ = exprs.size();
  for (const KernelLaunch& k : e->plan_.kernels)
    for (const CheckedOperand& c : k.checked_operands) exprs.push_back(c.offset_bytes);
  e->maps_at_ = exprs.size();
  for (const KernelLaunch& k : e->plan_.kernels)
    for (const TensorMapArg& m : k.tensor_maps)
      exprs.insert(exprs.end(), {m.offset_bytes, m.rows, m.cols, m.row_stride_bytes});
  try {
    e->program_ = ShapeProgram::compile(e->plan_.symbols, exprs);
  } catch (const std::exception& ex) {
    return Status::error(ex.what());
  }
  // Note [Fallbacks compiled on first need]: with a builder, the fallbacks are the second
  // module's kernels, in plan order.
  std::vector<std::string> names;
  size_t fallbacks = 0;
  for (const KernelLaunch& k : e->plan_.kernels) {
    const bool second = k.fallback && e->build_fallbacks_;
    e->in_fallback_module_.push_back(second);
    e->module_index_.push_back(second ? fallbacks++ : names.size());
    if (!second) names.push_back(k.name);
  }
  if (fallbacks == 0) e->build_fallbacks_ = nullptr;
  if (e->module_) {
    Status s = e->module_->resolve(names);
    if (!s.ok()) return s;
  }
  return e;
}

Status Executable::build_fallbacks() const {
  std::lock_guard<std::mutex> lock(fallback_mu_);
  if (!build_fallbacks_ || fallbacks_built_) return fallback_status_;
  fallbacks_built_ = true;
  Result<std::unique_ptr<KernelModule>> built = build_fallbacks_();
  if (!built.ok()) {
    fallback_status_ = Status::error("the fallback kernels did not compile: " + built.message());
    return fallback_status_;
  }
  fallback_module_ = std::move(built).value();
  if (fallback_module_) {
    std::vector<std::string> names;
    for (const KernelLaunch& k : plan_.kernels)
      if (k.fallback) names.push_back(k.name);
    fallback_status_ = fallback_module_->resolve(names);
  }
  return fallback_status_;
}

Result<const KernelModule*> Executable::module_of(size_t k) const {
  if (!in_fallback_module_[k]) return module_.get();
  Status s = build_fallbacks();
  if (!s.ok()) return s;
  std::lock_guard<std::mutex> lock(fallback_mu_);
  if (!fallback_module_)
    return Status::error("the fallback kernels were compiled but could not be loaded here");
  return static_cast<const KernelModule*>(fallback_module_.get());
}

Status Executable::check_devices(const dg_tensor* inputs, int num_inputs, const dg_tensor* outputs,
                                 int num_outputs, LaunchBatch* batch) const {
  batch->device = -1;
  batch->host_scalars.clear();
  const bool gpu = on_gpu() || (module_ == nullptr && target_ != "host");
  auto where = [](const dg_tensor& t) {
    return t.device_type == DG_DEVICE_CUDA ? "cuda:" + std::to_string(t.device_index)
                                           : std::string("host memory");
  };
  for (int i = 0; i < num_inputs + num_outputs; ++i) {
    bool is_output = i >= num_inputs;
    const dg_tensor& t = is_output ? outputs[i - num_inputs] : inputs[i];
    std::string what = is_output ? "output " + std::to_string(i - num_inputs) : describe_input(i);
    if (t.rank < 0) continue;  // a symbolic integer
    if (t.device_type != DG_DEVICE_HOST && t.device_type != DG_DEVICE_CUDA)
      return Status::error(what + " has an unknown device type " + std::to_string(t.device_type));
    if (!gpu) {
      if (t.device_type != DG_DEVICE_HOST)
        return Status::error(what + " is on " + where(t) + " but this executable was compiled " +
                             "for the host; compile for the GPU's arch instead");
      continue;
    }
    if (t.device_type == DG_DEVICE_HOST) {
      if (!is_output && t.rank == 0) {
        batch->host_scalars.push_back(i);
        continue;
      }
      return Status::error(what + " is in host memory but this executable runs on the GPU (" +
                           target_ +
                           "); only rank-0 host tensors (scalars) may come from the host");
    }
    if (t.device_index < 0) return Status::error(what + " has a negative device index");
    if (batch->device < 0) batch->device = t.device_index;
    if (t.device_index != batch->device)
      return Status::error("tensors on different devices: " + what + " is on " + where(t) +
                           ", an earlier one on cuda:" + std::to_string(batch->device));
  }
  if (gpu && batch->device < 0 && (num_inputs + num_outputs) > 0) {
    bool any_tensor = false;
    for (int i = 0; i < num_inputs; ++i) any_tensor |= inputs[i].rank >= 0;
    for (int j = 0; j < num_outputs; ++j) any_tensor |= outputs[j].rank >= 0;
    if (any_tensor)
      return Status::error("no input or output is a CUDA tensor, so there is no device to run " +
                           target_ + " kernels on");
  }
  return {};
}

size_t Executable::kernel_workspace_bytes(const LaunchBatch& batch) const {
  return static_cast<size_t>(batch.results[workspace_at_ + plan_.workspace.size()]);
}

// Note [Binding symbols] says which dims bind a symbol and which are checked.
Status Executable::bind(const dg_tensor* inputs, int num_inputs, LaunchBatch* batch) const {
  const Graph& g = graph_;
  if (num_inputs != static_cast<int>(g.inputs.size()))
    return Status::error("expected " + std::to_string(g.inputs.size()) + " inputs, got " +
                         std::to_string(num_inputs));
  for (int i = 0; i < num_inputs; ++i) {
    const Value& v = g.value(g.inputs[i]);
    const dg_tensor& t = inputs[i];
    if (v.kind == ValueKind::kSymInt) {
      if (t.rank != -1) return Status::error(describe_input(i) + " must be a symbolic integer");
      continue;
    }
    if (t.rank != v.type.rank())
      return Status::error(describe_input(i) + " must have rank " + std::to_string(v.type.rank()) +
                           ", got " + std::to_string(t.rank));
    if (t.dtype != static_cast<int>(v.type.dtype))
      return Status::error(describe_input(i) + " must be " + std::string(dtype_name(v.type.dtype)));
  }
  batch->symbol_values.resize(plan_.symbols.size());
  for (size_t s = 0; s < plan_.symbols.size(); ++s) {
    const SymbolSource& src = sources_[s];
    int64_t value = inputs[src.input].shape[src.dim < 0 ? 0 : src.dim];
    const SymExpr& sym = plan_.symbols[s];
    Interval r = sym.symbol_range();
    if (!r.contains(value) || value % sym.symbol_divisor() != 0)
      return Status::error("symbol " + sym.symbol_name() + " = " + std::to_string(value) +
                           " (from " + describe_input(src.input) + ") is outside its range");
    batch->symbol_values[s] = value;
  }
  batch->results.resize(program_.num_results());
  if (!program_.run(batch->symbol_values.data(), batch->results.data()))
    return Status::error("shape arithmetic overflowed for these input sizes");
  for (size_t r = 0; r < plan_.requirements.size(); ++r)
    if (batch->results[requirements_at_ + r] < 1)
      return Status::error(plan_.requirements[r].message);
  size_t at = input_dims_at_;
  for (int i = 0; i < num_inputs; ++i) {
    const dg_tensor& t = inputs[i];
    int rank = t.rank < 0 ? 1 : t.rank;
    for (int d = 0; d < rank; ++d, ++at) {
      if (t.shape[d] != batch->results[at]) {
        const Value& v = g.value(g.inputs[i]);
        std::string want =
            v.kind == ValueKind::kSymInt ? v.sym_value.to_string() : v.type.shape[d].to_string();
        return Status::error(describe_input(i) + " dim " + std::to_string(d) + " is " +
                             std::to_string(t.shape[d]) + " but must be " + want + " = " +
                             std::to_string(batch->results[at]));
      }
    }
  }
  return {};
}

Status Executable::prepare(const dg_tensor* inputs, int num_inputs, dg_tensor* outputs,
                           int num_outputs, size_t* workspace_bytes) const {
  if (num_outputs != static_cast<int>(graph_.outputs.size()))
    return Status::error("expected " + std::to_string(graph_.outputs.size()) + " outputs");
  LaunchBatch batch;
  Status s = bind(inputs, num_inputs, &batch);
  if (!s.ok()) return s;
  if (!(s = check_devices(inputs, num_inputs, nullptr, 0, &batch)).ok()) return s;
  size_t at = output_dims_at_;
  for (int j = 0; j < num_outputs; ++j) {
    const TensorType& t = graph_.tensor(graph_.outputs[j]);
    outputs[j].rank = t.rank();
    outputs[j].dtype = static_cast<int32_t>(t.dtype);
    outputs[j].device_type = batch.device >= 0 ? DG_DEVICE_CUDA : DG_DEVICE_HOST;
    outputs[j].device_index = batch.device >= 0 ? batch.device : 0;
    for (int d = 0; d < t.rank(); ++d) outputs[j].shape[d] = batch.results[at++];
  }
  size_t bytes = kernel_workspace_bytes(batch);
  if (!batch.host_scalars.empty())  // Note [Host scalars]
    bytes = (bytes + kScalarAlign - 1) / kScalarAlign * kScalarAlign +
            kScalarSlot * batch.host_scalars.size();
  *workspace_bytes = bytes;
  return {};
}

Status Executable::pack(const dg_tensor* inputs, int num_inputs, const dg_tensor* outputs,
                        int num_outputs, void* workspace, LaunchBatch* batch) const {
  if (num_outputs != static_cast<int>(graph_.outputs.size()))
    return Status::error("expected " + std::to_string(graph_.outputs.size()) + " outputs");
  Status s = bind(inputs, num_inputs, batch);
  if (!s.ok()) return s;
  if (!(s = check_devices(inputs, num_inputs, outputs, num_outputs, batch)).ok()) return s;
  size_t at = output_dims_at_;
  for (int j = 0; j < num_outputs; ++j) {
    const TensorType& t = graph_.tensor(graph_.outputs[j]);
    if (outputs[j].rank != t.rank() || outputs[j].dtype != static_cast<int32_t>(t.dtype))
      return Status::error("output " + std::to_string(j) + " must be " + t.to_string());
    for (int d = 0; d < t.rank(); ++d)
      if (outputs[j].shape[d] != batch->results[at++])
        return Status::error("output " + std::to_string(j) + " has the wrong shape");
  }
  size_t total_ptrs = 0, total_maps = 0, total_args = 0;
  for (const KernelLaunch& k : plan_.kernels) {
    total_ptrs += k.buffers.size();
    total_maps += k.tensor_maps.size();
    total_args += k.buffers.size() + k.tensor_maps.size() + plan_.symbols.size();
  }
  batch->pointers.resize(total_ptrs);
  batch->tensor_maps.resize(total_maps);  // sized once: args point into it
  batch->args.resize(total_args);
  batch->tma_ok.assign(plan_.kernels.size(), 1);
  batch->tma_refusal.clear();
  // Note [Host scalars]: where each scalar's value goes in the workspace.
  size_t scalars_at =
      (kernel_workspace_bytes(*batch) + kScalarAlign - 1) / kScalarAlign * kScalarAlign;
  auto input_pointer = [&](int index) -> void* {
    for (size_t k = 0; k < batch->host_scalars.size(); ++k)
      if (batch->host_scalars[k] == index)
        return static_cast<char*>(workspace) + scalars_at + kScalarSlot * k;
    return inputs[index].data;
  };
  size_t p = 0, a = 0, m = 0, r = maps_at_;
  for (size_t kernel = 0; kernel < plan_.kernels.size(); ++kernel) {
    const KernelLaunch& k = plan_.kernels[kernel];
    const size_t first_pointer = p;
    for (const BufferRef& b : k.buffers) {
      void* ptr = nullptr;
      switch (b.kind) {
        case BufferRef::kInput:
          ptr = batch->host_scalars.empty() ? inputs[b.index].data : input_pointer(b.index);
          break;
        case BufferRef::kOutput:
          ptr = outputs[b.index].data;
          break;
        case BufferRef::kWorkspace:
          ptr = static_cast<char*>(workspace) + batch->results[workspace_at_ + b.index];
          break;
      }
      batch->pointers[p] = ptr;
      batch->args[a++] = &batch->pointers[p++];
    }
    if (!k.tensor_maps.empty() && !grid_empty(*batch, kernel)) {
      Status encoded = encode_tensor_maps(k, batch, first_pointer, m, r);
      if (!encoded.ok() && batch->tma_refusal.empty()) batch->tma_refusal = encoded.message();
      batch->tma_ok[kernel] = encoded.ok();
    }
    r += kResultsPerMap * k.tensor_maps.size();
    for (size_t i = 0; i < k.tensor_maps.size(); ++i) batch->args[a++] = &batch->tensor_maps[m++];
    for (size_t s = 0; s < plan_.symbols.size(); ++s) batch->args[a++] = &batch->symbol_values[s];
  }
  return {};
}

bool Executable::grid_empty(const LaunchBatch& batch, size_t k) const {
  for (int d = 0; d < 3; ++d)
    if (batch.results[grids_at_ + 3 * k + d] <= 0) return true;
  return false;
}

Status Executable::encode_tensor_maps(const KernelLaunch& kl, LaunchBatch* batch,
                                      size_t first_pointer, size_t first_map,
                                      size_t first_result) const {
  for (size_t i = 0; i < kl.tensor_maps.size(); ++i) {
    const TensorMapArg& t = kl.tensor_maps[i];
    const int64_t* v = &batch->results[first_result + kResultsPerMap * i];
    const auto address = reinterpret_cast<uintptr_t>(batch->pointers[first_pointer + t.param]) +
                         static_cast<uintptr_t>(v[0]);
    Status s = module_ ? module_->encode_tensor_map(
                             &batch->tensor_maps[first_map + i],
                             reinterpret_cast<const void*>(address), static_cast<uint64_t>(v[1]),
                             static_cast<uint64_t>(v[2]), static_cast<uint64_t>(v[3]),
                             static_cast<uint32_t>(t.box_rows), static_cast<uint32_t>(t.box_cols))
                       : Status::error("no kernel module here to encode it");
    if (!s.ok())
      return Status::error("the tensor map of " + describe_buffer(kl.buffers[t.param]) +
                           " was refused: " + s.message());
  }
  return {};
}

void Executable::report_tma_fallback(const KernelLaunch& kl, const LaunchBatch& batch) const {
  count_tma_fallback();
  std::call_once(tma_fallback_logged_, [&] {
    std::fprintf(
        stderr,
        "dyngen: warning: kernel %s cannot read its operands with TMA: %s. Its GEMM's mma.sync "
        "fallback kernel ran instead: correct results (summed in mma.sync's order), slower. A "
        "contiguous copy of the tensor, 16-byte aligned, avoids it. Later such calls of "
        "this graph are counted in the stats (tma_fallback_launches), not logged.\n",
        kl.name.c_str(), batch.tma_refusal.c_str());
  });
}

bool Executable::check_operand_alignment(const KernelLaunch& kl, const LaunchBatch& batch,
                                         size_t first_pointer, size_t first_checked) const {
  for (size_t i = 0; i < kl.checked_operands.size(); ++i) {
    const CheckedOperand& c = kl.checked_operands[i];
    const auto address = reinterpret_cast<uintptr_t>(batch.pointers[first_pointer + c.param]) +
                         static_cast<uintptr_t>(batch.results[first_checked + i]);
    const auto alignment = static_cast<uintptr_t>(c.alignment);
    if (address % alignment == 0) continue;
    count_unaligned_launch();
    std::call_once(unaligned_logged_, [&] {
      const std::string at = (c.written ? "writes " : "reads ") +
                             describe_buffer(kl.buffers[c.param]) + " at an address that is " +
                             std::to_string(address % alignment) + " bytes past a " +
                             std::to_string(alignment) + "-byte boundary, so ";
      const std::string how =
          kl.aligned_only
              ? std::string("the call runs its GEMM's fallback kernel, which ") +
                    (c.written         ? "stores element by element, not in pairs"
                     : c.read_in_pairs ? "loads it element by element, not in pairs"
                                       : "loads element by element, not in 16-byte copies")
              : "it runs its element-load loop instead of the 16-byte copies";
      std::fprintf(stderr,
                   "dyngen: warning: kernel %s %s%s: the same results, slower. A contiguous copy "
                   "of the tensor avoids it. Later such launches of this graph are counted in "
                   "the stats (unaligned_launches), not logged.\n",
                   kl.name.c_str(), at.c_str(), how.c_str());
    });
    return !kl.aligned_only;
  }
  return true;
}

Status Executable::launch(const dg_tensor* inputs, int num_inputs, const dg_tensor* outputs,
                          int num_outputs, void* workspace, void* stream) const {
  if (!module_)
    return Status::error("this executable was compiled for " + target_ +
                         " and there is no such device here to run it");
  LaunchBatch batch;
  Status s = pack(inputs, num_inputs, outputs, num_outputs, workspace, &batch);
  if (!s.ok()) return s;
  if (!batch.host_scalars.empty()) {  // Note [Host scalars]
    size_t at = (kernel_workspace_bytes(batch) + kScalarAlign - 1) / kScalarAlign * kScalarAlign;
    for (size_t k = 0; k < batch.host_scalars.size(); ++k) {
      const dg_tensor& t = inputs[batch.host_scalars[k]];
      s = module_->copy_to_device(static_cast<char*>(workspace) + at + kScalarSlot * k, t.data,
                                  dtype_bytes(t.dtype), batch.device, stream);
      if (!s.ok()) return Status::error(describe_input(batch.host_scalars[k]) + ": " + s.message());
    }
  }
  size_t a = 0, p = 0, c = checked_at_;
  // Note [GEMM fallbacks]: the last GEMM's kernel chosen by M could not run, and its fallback
  // has to (`owed_by` that kernel until it has); `counted`: for an address already counted.
  bool counted = false;
  std::optional<size_t> owed_by;
  auto unpaid = [&] {
    return Status::error("internal error: kernel " + plan_.kernels[*owed_by].name +
                         " could not run in this call and its GEMM has no fallback kernel");
  };
  for (size_t k = 0; k < plan_.kernels.size(); ++k) {
    const KernelLaunch& kl = plan_.kernels[k];
    void** args = batch.args.data() + a;
    a += kl.buffers.size() + kl.tensor_maps.size() + plan_.symbols.size();
    const size_t first_pointer = p, first_checked = c;
    p += kl.buffers.size();
    c += kl.checked_operands.size();
    std::array<uint32_t, 3> grid;
    bool empty = false;
    for (int d = 0; d < 3; ++d) {
      int64_t v = batch.results[grids_at_ + 3 * k + d];
      if (v <= 0) empty = true;
      if (v > 0x7fffffff) return Status::error("grid too large for kernel " + kl.name);
      grid[d] = static_cast<uint32_t>(v);
    }
    // A GEMM's kernels run from its variant 0 to the next GEMM's (Note [Tile choice]).
    if (kl.variant == 0 && !kl.fallback) {
      if (owed_by) return unpaid();
      counted = false;
    }
    if (empty) continue;  // nothing to compute, e.g. zero tokens
    if (kl.fallback && !owed_by) continue;
    if (!batch.tma_ok[k]) {
      report_tma_fallback(kl, batch);
      owed_by = k;
      continue;
    }
    if (!counted && !check_operand_alignment(kl, batch, first_pointer, first_checked)) {
      counted = true;
      owed_by = k;
      continue;
    }
    Result<const KernelModule*> m = module_of(k);
    if (!m.ok()) return Status::error(kl.name + ": " + m.message());
    s = m.value()->launch(module_index_[k], batch.device, grid, kl.block, kl.shared_bytes, args,
                          stream);
    if (!s.ok()) return Status::error(kl.name + ": " + s.message());
    if (kl.fallback) owed_by.reset();
  }
  if (owed_by) return unpaid();
  return {};
}

}  // namespace dg
