// Op kinds and their static traits, generated from ops.def.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace dg {

enum class OpKind : uint16_t {
#define DG_OP(name, text, code, category, min_in, max_in) name = code,
#include "ir/ops.def"
#undef DG_OP
};

// How an op computes; codegen and the reference evaluator dispatch on this first.
enum class OpCategory : uint8_t {
  kCreate,   // no tensor inputs: constant, full, sym_constant (a symbolic integer's value)
  kCast,     // dtype conversion
  kUnary,    // float elementwise, one input
  kBinary,   // float elementwise with broadcasting
  kCompare,  // elementwise with broadcasting, bool result
  kWhere,    // select with broadcasting
  kMatmul,   // contractions
  kReduce,   // reductions over dims, and cumsum (a scan along one dim)
  kLayout,   // reshape / permute / expand / slice / cat: data movement only
  kIndex,    // gather / scatter along a dim by an index tensor (index_*, gather, scatter)
  kGrouped,  // grouped experts: routing by expert (offsets, order) and per-expert-segment GEMMs
};

struct OpInfo {
  OpKind kind;
  std::string_view name;
  OpCategory category;
  int min_inputs;
  int max_inputs;  // -1: variadic
};

const OpInfo& op_info(OpKind kind);
std::string_view op_name(OpKind kind);
std::optional<OpKind> op_from_name(std::string_view name);
std::optional<OpKind> op_from_code(uint32_t code);
// Every op, in catalog order (for tests that cover the whole catalog).
const OpInfo* all_ops(int* count);

}  // namespace dg
