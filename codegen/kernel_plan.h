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
// operand address 16-byte aligned, and a GEMM epilogue that stores in pairs (Note [Paired stores]
// in codegen/device/dg_store.cuh) needs each output aligned to a pair. Codegen proves that for
// offsets and strides, but a caller's tensor may start anywhere (a view with a storage offset).
// So the launch lists the addresses its kernel needs aligned, and the executable evaluates them
// at every launch. When one is off, the call takes a slow path: a tensor-core GEMM's kernel
// (KernelLaunch::aligned_only) hands the call to the GEMM's fallback kernel (Note [GEMM
// fallbacks]), other kernels run their own loop of element loads (Note [Lean main loop] in
// codegen/device/dg_gemm_sm80.cuh): the same results, slower. That must not be silent: the
// executable counts each such launch (dg_stats.unaligned_launches) and logs the first one of each
// executable.
struct CheckedOperand {
  int param;             // position in KernelLaunch::buffers
  SymExpr offset_bytes;  // from the buffer's start
  int alignment = 16;    // bytes
  bool written = false;  // an output written in pairs, rather than an operand read in 16 bytes
  // An epilogue operand read in pairs (Note [Epilogue operand loads] in
  // codegen/device/dg_epilogue_loads.cuh).
  bool read_in_pairs = false;
  // Checked by the kernels whose epilogue pairs, not by the GEMM's fallback (Note [GEMM
  // fallbacks]), which stores and loads element by element.
  bool epilogue_pairs() const { return written || read_in_pairs; }
  bool operator==(const CheckedOperand& o) const {
    return param == o.param && offset_bytes == o.offset_bytes && alignment == o.alignment &&
           written == o.written && read_in_pairs == o.read_in_pairs;
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
// fallback kernel (Note [GEMM fallbacks]) instead, with the mma.sync build's results (wgmma sums
// in another order, within rounding), and the runtime counts the launch
// (dg_stats.tma_fallback_launches) and logs the first one of each executable.
//
// Note [GEMM fallbacks]
// A tensor-core GEMM's kernels need what the host checks before each launch: 16-byte aligned
// operands (the main loop has no element-load path: in every kernel it was about a sixth of
// NVRTC's time for the seed backward), outputs aligned to the pairs the epilogue stores (one
// epilogue, not one per store width: Note [Paired stores]), and on sm_90a tensor maps the driver
// accepts. The GEMM ends with one fallback kernel that needs none of them: mma.sync with the
// GEMM's default tile (Note [Tile choice]) for every M, reading through its own alignment branch
// and storing element by element. In a call where the kernel chosen by M cannot run, the
// executable skips it and launches the fallback; in every other call the fallback is skipped. It
// is the GEMM's last variant (variant > 0, after every kernel that can hand over to it), and a
// plan at a binding does not count it as launched. One fallback for all M, not one per tile
// variant: it is the rare path (a view with a storage offset). Fallback launches are counted and
// logged once (unaligned_launches, tma_fallback_launches), not raised under DYNGEN_STRICT (which
// is about graphs dyngen leaves to eager): the fallback is dyngen's own kernel, slower.
//
// Note [Fallbacks compiled on first need]
// Most processes never launch a fallback, yet compiling them took about a quarter of NVRTC's time
// (the grouped OLMoE layer on sm_90a, 4 fallbacks among 54 kernels in the forward: 3.3 -> 2.4 s of
// compiler CPU time, backward 3.9 -> 2.9 s). So they are a second translation unit
// (KernelPlan::fallback_source, the same prelude and only the fallbacks), compiled, cached on disk
// under its own key and loaded by the executable the first time a call needs one
// (Executable::build_fallbacks; `dyngen compile --fallbacks` puts them in a prebuilt cache). A
// call that needs it waits for that compile; if it fails, the call fails with the compiler's
// message, never runs something else. Without the second unit (a hand-built plan) the fallbacks
// are in the first.
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
  // Note [GEMM fallbacks]: launched only in a call where the kernel of the same GEMM chosen by M
  // could not run (a tensor map refused, an address off its boundary); skipped otherwise.
  bool fallback = false;
  // Note [GEMM fallbacks]: the kernel has no path for a checked operand off its alignment; a call
  // with one runs the GEMM's fallback instead. Otherwise (rank-r partials, grouped GEMMs, the
  // fallback) the kernel takes such an operand itself, slower.
  bool aligned_only = false;
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
  // > 0: the kernel runs its f32 contractions on tensor cores as this many bf16 MMAs per product
  // (bf16 splits, Note [Rank-r split-K on tensor cores]); they count in tensor_flops once, and
  // the performance model times split_terms times their MMAs. 0: f32 contractions run on FMA.
  int split_terms = 0;
  // f32 rank-r products an sm_90a GEMM's epilogue runs on tensor cores as this many bf16 MMAs
  // each (Note [Rank-r products on tensor cores] in codegen/device/dg_gemm_sm90.cuh): counted in
  // flops but not tensor_flops, which the main loop runs; the performance model times them in the
  // epilogue (Note [Epilogue MMAs] in runtime/model/perf_model.h).
  SymExpr epilogue_mma_flops{0};
  int epilogue_split_terms = 0;
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
  std::string source;  // one CUDA C++ translation unit with every kernel but the fallbacks
  // The GEMMs' fallback kernels (KernelLaunch::fallback), a translation unit of their own that
  // the runtime compiles on first need; empty when there are none (Note [Fallbacks compiled on
  // first need]).
  std::string fallback_source;
};

}  // namespace dg
