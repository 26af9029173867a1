// What codegen hands the runtime: kernels in launch order, the buffers they touch, and every
// size and grid as a symbolic expression for the host-side shape program.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dg {

// Where a kernel's pointer argument points.
struct BufferRef {
  enum Kind : uint8_t { kInput, kOutput, kWorkspace };
  Kind kind;
  int index;  // graph input / output position, or workspace slot
  bool operator==(const BufferRef& o) const { return kind == o.kind && index == o.index; }
};

// Note [Unaligned operands]
// The tensor-core main loop's cp.async copies and the rank-r partials' 16-byte loads need every
// operand address 16-byte aligned. Codegen proves that for offsets and strides, but a caller's
// tensor may start anywhere (a view with a storage offset), so the kernel checks the addresses
// at run time and, when one is off, runs a loop of element loads instead: the same results,
// slower (Note [Lean main loop] in codegen/device/dg_gemm.cuh). That must not be silent: the
// launch lists the addresses its kernel checks, and the executable evaluates them at every
// launch, counts each launch that takes the slow path (dg_stats.unaligned_launches) and logs the
// first one of each executable.
struct CheckedOperand {
  int param;             // position in KernelLaunch::buffers
  SymExpr offset_bytes;  // from the buffer's start
  bool operator==(const CheckedOperand& o) const {
    return param == o.param && offset_bytes == o.offset_bytes;
  }
};

struct KernelLaunch {
  std::string name;                // extern "C" entry point
  std::string summary;             // one line for humans: what the kernel computes
  std::vector<BufferRef> buffers;  // pointer parameters, in order; the graph's symbols follow
  std::vector<CheckedOperand> checked_operands;  // Note [Unaligned operands]
  std::array<SymExpr, 3> grid;                   // blocks; a launch with any zero extent is skipped
  std::array<int, 3> block{1, 1, 1};
  int shared_bytes = 0;  // dynamic shared memory
  // 0, or k: this kernel is the k-th alternative of the GEMM whose variant 0 comes k kernels
  // before it; each call launches one of them, by M (Note [Tile choice] in tile_choice.cc).
  int variant = 0;
  // 1 for the calls that launch this kernel, 0 for those that launch another variant: a factor of
  // a grid extent. The costs below are the GEMM's, the same in every variant: a sum over the plan
  // counts variant 0 only, a sum at a binding the launched kernels.
  SymExpr runs{1};
  // The graph nodes (indices into Graph::nodes) this kernel computes, in order; empty for a
  // plain copy. With `buffers`, this is all the cost model needs (Note [Kernel cost model]).
  std::vector<int> nodes;
  // Filled by LoweringContext::add_kernel from nodes and buffers (codegen/kernel_cost.h).
  SymExpr flops;         // floating-point operations
  SymExpr tensor_flops;  // the part in bf16/f16 contractions (tensor-core eligible)
  SymExpr bytes;         // compulsory global-memory traffic, reads plus writes
};

struct WorkspaceSlot {
  SymExpr bytes;
  SymExpr offset;  // from the start of the workspace, 256-byte aligned
  std::string what;
};

// A condition checked at every call before any launch: `value` must be at least 1.
struct RuntimeRequirement {
  SymExpr value;
  std::string message;  // what is wrong when it is not, e.g. "amax over an empty dim"
};

struct KernelPlan;
// The kernels a call launches at most: variants of one GEMM count once.
size_t launch_sites(const KernelPlan& plan);

struct KernelPlan {
  std::vector<RuntimeRequirement> requirements;
  std::vector<SymExpr> symbols;  // trailing `long long` arguments of every kernel, in order
  std::vector<KernelLaunch> kernels;
  std::vector<WorkspaceSlot> workspace;
  SymExpr workspace_bytes;
  std::string source;  // one CUDA C++ translation unit with every kernel
};

}  // namespace dg
