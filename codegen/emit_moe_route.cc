// Lowering of the routing ops (Note [Grouped experts ops] in ir/shape_infer_grouped.cc):
// expert_offsets and expert_order as a deterministic counting sort over chunks of the routing,
// device code in codegen/device/dg_grouped.cuh.
//   1. count: one block per chunk counts its entries per expert (integer shared atomics);
//   2. scan: one block turns the per-chunk counts into each chunk's start within its expert, in
//      chunk order, and writes the inclusive offsets;
//   3. scatter (expert_order only): one warp per chunk places the chunk's entries, 32 at a time,
//      at offs[e - 1] + (earlier entries of e), which is the stable order.
// No float arithmetic and no order-dependent atomics: the result is the same on every run.
//
// Note [Bad expert indices]
// PyTorch raises on an expert index outside [0, E) (index_select's device-side assert on a GPU);
// so does the reference evaluator. The count pass checks every index and ends its launch with
// printf + __trap() on a GPU, which the runtime reports as the launch's error at the next
// synchronization (as PyTorch's device-side asserts do: the CUDA context is unusable afterwards),
// and as the launch's error at once under the host emulation. Nothing is read or written through
// a bad index: the count pass never counts it and the scatter skips it. A grouped GEMM checks the
// offsets it is given the same way (Note [Grouped tile schedule] in dg_grouped.cuh), so offsets no
// routing produces are an error too, never an out-of-bounds access.
#include "codegen/c_expr.h"
#include "codegen/grouped_experts.h"
#include "codegen/kernel_params.h"

namespace dg {

namespace {

// Entries per chunk: one count block (256 threads, 8 entries each) and one scatter warp.
constexpr int64_t kChunk = 2048;

struct Route {
  const Node& node;
  int64_t experts;
  SymExpr entries;  // numel(top_k_index)
  SymExpr chunks;   // ceil(entries / kChunk), at least 1 (the scan runs even for no entries)
  DType index_dtype;
  BufferRef index, hist, offs;
};

std::string E(const Route& r) { return std::to_string(r.experts); }

std::string header(LoweringContext& ctx, KernelLaunch& k, const KernelParams& params, int threads) {
  k.buffers = params.buffers();
  k.block = {threads, 1, 1};
  return "#include \"dg_grouped.cuh\"\nextern \"C\" __global__ void __launch_bounds__(" +
         std::to_string(threads) + ") " + k.name + "(" + params.declaration() +
         ctx.symbol_params() + ") {\n";
}

void emit_count(LoweringContext& ctx, const Route& r) {
  KernelParams params;
  const std::string hist = params.add(r.hist, DType::kI32, true);
  const std::string idx = params.add(r.index, r.index_dtype, false);
  KernelLaunch k;
  k.name = ctx.kernel_name("route_count");
  k.summary = "%" + std::to_string(r.node.output) + " routing: per-chunk counts of " +
              r.entries.to_string() + " entries over " + E(r) + " experts, indices checked";
  k.grid = {r.chunks, SymExpr(1), SymExpr(1)};
  std::string src = header(ctx, k, params, 256) + "  dg_route_count<" + ctype(r.index_dtype) +
                    ", " + E(r) + ">(" + idx + ", " + c_expr(r.entries) + ", " +
                    std::to_string(kChunk) + ", " + hist + ");\n}\n";
  ctx.add_kernel(std::move(k), src);
}

void emit_scan(LoweringContext& ctx, const Route& r) {
  KernelParams params;
  const std::string hist = params.add(r.hist, DType::kI32, true);
  const std::string offs = params.add(r.offs, DType::kI32, true);
  KernelLaunch k;
  k.name = ctx.kernel_name("route_scan");
  k.summary = "%" + std::to_string(r.node.output) + " routing: chunk starts per expert and the " +
              E(r) + " inclusive offsets";
  k.grid = {SymExpr(1), SymExpr(1), SymExpr(1)};
  std::string src = header(ctx, k, params, 256) + "  dg_route_scan<" + E(r) + ">(" + hist + ", " +
                    c_expr(r.chunks) + ", " + offs + ");\n}\n";
  ctx.add_kernel(std::move(k), src);
}

void emit_scatter(LoweringContext& ctx, const Route& r) {
  KernelParams params;
  const std::string order = params.add(ctx.buffer_of(r.node.output), DType::kI32, true);
  const std::string idx = params.add(r.index, r.index_dtype, false);
  const std::string hist = params.add(r.hist, DType::kI32, false);
  const std::string offs = params.add(r.offs, DType::kI32, false);
  KernelLaunch k;
  k.name = ctx.kernel_name("route_order");
  k.summary = "%" + std::to_string(r.node.output) + " = stable expert order of " +
              r.entries.to_string() + " entries, one warp per chunk of " + std::to_string(kChunk);
  k.grid = {ceildiv(r.entries, SymExpr(kChunk)), SymExpr(1), SymExpr(1)};
  std::string src = header(ctx, k, params, 32) + "  dg_route_scatter<" + ctype(r.index_dtype) +
                    ", " + E(r) + ">(" + idx + ", " + c_expr(r.entries) + ", " +
                    std::to_string(kChunk) + ", " + hist + ", " + offs + ", " + order + ");\n}\n";
  ctx.add_kernel(std::move(k), src);
}

}  // namespace

void emit_moe_route(LoweringContext& ctx, const Node& node) {
  const Graph& g = ctx.graph();
  const TensorType& index = g.tensor(node.inputs[0]);
  const int64_t experts = *node.attrs.get_int("num_experts");
  const SymExpr entries = index.numel();
  const SymExpr chunks = max(ceildiv(entries, SymExpr(kChunk)), SymExpr(1));
  const std::string tag = "%" + std::to_string(node.output);
  const BufferRef hist = ctx.workspace(chunks * SymExpr(4 * experts), tag + " per-chunk counts");
  const BufferRef offs = node.op == OpKind::kExpertOffsets
                             ? ctx.buffer_of(node.output)
                             : ctx.workspace(SymExpr(4 * experts), tag + " expert offsets");
  const Route r{node, experts, entries, chunks, index.dtype, ctx.buffer_of(node.inputs[0]),
                hist, offs};
  emit_count(ctx, r);
  emit_scan(ctx, r);
  if (node.op == OpKind::kExpertOrder) emit_scatter(ctx, r);
}

}  // namespace dg
