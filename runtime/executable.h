// A compiled graph, ready to run for any value of its symbols: binds symbols from the inputs'
// shapes, evaluates sizes and grids with the shape program, and launches the kernels.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/kernel_plan.h"
#include "ir/graph.h"
#include "runtime/dyngen.h"
#include "runtime/kernel_module.h"
#include "runtime/shape_program.h"
#include "runtime/status.h"

namespace dg {

// Grids and argument pointers of every launch of one call, computed without launching.
struct LaunchBatch {
  int device = -1;                // the CUDA device of a GPU executable's tensors
  std::vector<int> host_scalars;  // inputs passed by value: Note [Host scalars]
  std::vector<int64_t> symbol_values;
  std::vector<int64_t> results;             // the shape program's results
  std::vector<void*> pointers;              // buffer pointers, kernel after kernel
  std::vector<TensorMapBytes> tensor_maps;  // kernel after kernel: Note [Tensor maps]
  std::vector<void*> args;  // cuLaunchKernel-style: each kernel's pointers, maps, then symbols
  // Per kernel: 1 when its tensor maps encoded (or it has none, or its grid is empty).
  std::vector<char> tma_ok;
  // The operand and the driver's reason for the first kernel whose maps did not encode.
  std::string tma_refusal;
};

// Note [Fallbacks compiled on first need] (codegen/kernel_plan.h): compiles (or finds in the
// cache) and loads the module of plan.fallback_source; a null module when the target cannot run
// here.
using FallbackBuilder = std::function<Result<std::unique_ptr<KernelModule>>()>;

class Executable {
 public:
  // `module` may be null: the executable then describes and prepares, but cannot launch (a
  // binary compiled for a GPU this machine lacks). With `build_fallbacks`, the plan's fallback
  // kernels are not in `module` but in the module it builds on first need.
  static Result<std::shared_ptr<Executable>> create(Graph graph, KernelPlan plan,
                                                    std::unique_ptr<KernelModule> module,
                                                    std::string target,
                                                    FallbackBuilder build_fallbacks = nullptr);

  int num_inputs() const { return static_cast<int>(graph_.inputs.size()); }
  int num_outputs() const { return static_cast<int>(graph_.outputs.size()); }
  const Graph& graph() const { return graph_; }
  const KernelPlan& plan() const { return plan_; }
  const std::string& target() const { return target_; }
  bool runnable() const { return module_ != nullptr; }
  bool on_gpu() const { return module_ && module_->on_gpu(); }

  // Checks the inputs and fills output shapes/dtypes and the workspace size.
  Status prepare(const dg_tensor* inputs, int num_inputs, dg_tensor* outputs, int num_outputs,
                 size_t* workspace_bytes) const;
  // Everything a launch needs, without launching (the host-overhead benchmark measures this).
  Status pack(const dg_tensor* inputs, int num_inputs, const dg_tensor* outputs, int num_outputs,
              void* workspace, LaunchBatch* batch) const;
  Status launch(const dg_tensor* inputs, int num_inputs, const dg_tensor* outputs, int num_outputs,
                void* workspace, void* stream) const;
  // Note [Fallbacks compiled on first need]: compiles and loads the fallback kernels now, as the
  // first call that needs one would (once; later calls return the first one's result). For
  // tools that read their binary, and for a cache prebuilt with them.
  Status build_fallbacks() const;

 private:
  Executable() = default;
  Status bind(const dg_tensor* inputs, int num_inputs, LaunchBatch* batch) const;
  Status check_devices(const dg_tensor* inputs, int num_inputs, const dg_tensor* outputs,
                       int num_outputs, LaunchBatch* batch) const;
  // Bytes of workspace the kernels use, before the host scalars' slots.
  size_t kernel_workspace_bytes(const LaunchBatch& batch) const;
  // Note [Unaligned operands]: when `kl`, whose pointers start at batch.pointers[first_pointer]
  // and checked offsets at batch.results[first_checked], takes the slow path, counts it and (once
  // per executable) logs it. False when the kernel cannot take it (KernelLaunch::aligned_only):
  // then its GEMM's fallback kernel runs instead (Note [GEMM fallbacks]).
  bool check_operand_alignment(const KernelLaunch& kl, const LaunchBatch& batch,
                               size_t first_pointer, size_t first_checked) const;
  // Whether kernel `k`'s grid (batch.results at grids_at_) has a zero extent.
  bool grid_empty(const LaunchBatch& batch, size_t k) const;
  // Note [Tensor maps]: encodes `kl`'s maps into batch->tensor_maps from first_map, its pointers
  // starting at batch->pointers[first_pointer] and its maps' results at
  // batch->results[first_result]; an error names the operand.
  Status encode_tensor_maps(const KernelLaunch& kl, LaunchBatch* batch, size_t first_pointer,
                            size_t first_map, size_t first_result) const;
  // Note [Tensor maps]: kernel `kl`'s maps did not encode, so this call runs its GEMM's fallback
  // kernel; counts it and (once per executable) logs it.
  void report_tma_fallback(const KernelLaunch& kl, const LaunchBatch& batch) const;

  // The module holding plan kernel `k` (built on first need for a fallback), or an error.
  Result<const KernelModule*> module_of(size_t k) const;

  // Where each symbol's value comes from: input position and dim (-1 for a SymInt input).
  struct SymbolSource {
    int input;
    int dim;
  };

  Graph graph_;
  KernelPlan plan_;
  std::unique_ptr<KernelModule> module_;
  std::string target_;
  std::vector<SymbolSource> sources_;
  ShapeProgram program_;
  // Offsets into the shape program's results.
  size_t input_dims_at_ = 0, output_dims_at_ = 0, workspace_at_ = 0, grids_at_ = 0,
         requirements_at_ = 0, checked_at_ = 0, maps_at_ = 0;
  mutable std::once_flag unaligned_logged_, tma_fallback_logged_;
  // Note [Fallbacks compiled on first need]: per plan kernel, its position in its module and
  // whether that module is the fallbacks'; the builder, and what it built (under fallback_mu_).
  std::vector<size_t> module_index_;
  std::vector<bool> in_fallback_module_;
  FallbackBuilder build_fallbacks_;
  mutable std::mutex fallback_mu_;
  mutable bool fallbacks_built_ = false;
  mutable Status fallback_status_;
  mutable std::unique_ptr<KernelModule> fallback_module_;
};

}  // namespace dg
