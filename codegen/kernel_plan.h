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
// first one of each executable. A GEMM epilogue that writes its outputs in pairs (Note [Paired
// stores] in codegen/device/dg_store.cuh) checks their base addresses the same way, each for the
// size of a pair, and an unaligned one is counted and logged as well.
struct CheckedOperand {
  int param;             // position in KernelLaunch::buffers
  SymExpr offset_bytes;  // from the buffer's start
  int alignment = 16;    // bytes
  bool written = false;  // an output written in pairs, rather than an operand read in 16 bytes
  bool operator==(const CheckedOperand& o) const {
    return param == o.param && offset_bytes == o.offset_bytes && alignment == o.alignment &&
           written == o.written;
  }
};

// Note [Tensor maps]
// An sm_90a GEMM kernel reads A and B with TMA (Note [Warp-specialized main loop] in
// codegen/device/dg_gemm_sm90.cuh), each through a tensor map: a 128-byte descriptor of a 2-D
// bf16 matrix in global memory, passed by value (__grid_constant__) after the pointer parameters
// and before the symbols. A map holds its matrix's address, so the runtime encodes each one at
// every call: cuTensorMapEncodeTiled through the driver table on a GPU (and the driver double),
// dg_tensor_map_encode under the host emulation. The driver refuses a map whose address or row
// stride is not 16-byte aligned (a view with a storage offset); then that call runs the GEMM's
// mma.sync kernels (those marked tma_fallback) instead, with the mma.sync build's results (wgmma
// sums in another order, within rounding), and the runtime counts the launch
// (dg_stats.tma_fallback_launches) and logs the first one of each executable. Fallback kernels run
// only then: they are variants of the GEMM (variant > 0), and a plan at a binding does not count
// them as launched.
struct TensorMapArg {
  int param;             // the pointer parameter (position in KernelLaunch::buffers) it maps
  SymExpr offset_bytes;  // the matrix's start, from the buffer's start
  // The matrix: `rows` rows of `cols` contiguous bf16 elements, `row_stride_bytes` apart
  // (cuTensorMapEncodeTiled's dims {cols, rows} and stride {row_stride_bytes}).
  SymExpr rows, cols, row_stride_bytes;
  int box_rows = 0,
      box_cols = 0;  // what one copy moves (box {box_cols, box_rows}), 128-byte swizzle
  bool operator==(const TensorMapArg& o) const {
    return param == o.param && offset_bytes == o.offset_bytes && rows == o.rows && cols == o.cols &&
           row_stride_bytes == o.row_stride_bytes && box_rows == o.box_rows &&
           box_cols == o.box_cols;
  }
};

struct KernelLaunch {
  std::string name;                // extern "C" entry point
  std::string summary;             // one line for humans: what the kernel computes
  std::vector<BufferRef> buffers;  // pointer parameters, in order; the graph's symbols follow
  std::vector<CheckedOperand> checked_operands;  // Note [Unaligned operands]
  // Note [Tensor maps]: the kernel's tensor-map parameters, in order, after the pointers.
  std::vector<TensorMapArg> tensor_maps;
  // Note [Tensor maps]: launched only in a call where a kernel of the same GEMM (from its
  // variant 0 on) with a non-empty grid could not encode its tensor maps; skipped otherwise.
  bool tma_fallback = false;
  std::array<SymExpr, 3> grid;  // blocks; a launch with any zero extent is skipped
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
