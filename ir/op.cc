#include "ir/op.h"

namespace dg {
namespace {

constexpr OpInfo kOps[] = {
#define DG_OP(name, text, code, category, min_in, max_in) \
  {OpKind::name, text, OpCategory::category, min_in, max_in},
#include "ir/ops.def"
#undef DG_OP
};
constexpr int kNumOps = sizeof(kOps) / sizeof(kOps[0]);

// The codes in ops.def are dense from 1, so a code indexes the table directly.
constexpr bool codes_are_dense() {
  for (int i = 0; i < kNumOps; ++i)
    if (static_cast<int>(kOps[i].kind) != i + 1) return false;
  return true;
}
static_assert(codes_are_dense(), "ops.def codes must be 1, 2, 3, ... in order");

}  // namespace

const OpInfo& op_info(OpKind kind) { return kOps[static_cast<int>(kind) - 1]; }
std::string_view op_name(OpKind kind) { return op_info(kind).name; }

std::optional<OpKind> op_from_name(std::string_view name) {
  for (const auto& op : kOps)
    if (op.name == name) return op.kind;
  return std::nullopt;
}

std::optional<OpKind> op_from_code(uint32_t code) {
  if (code < 1 || code > static_cast<uint32_t>(kNumOps)) return std::nullopt;
  return kOps[code - 1].kind;
}

const OpInfo* all_ops(int* count) {
  *count = kNumOps;
  return kOps;
}

}  // namespace dg
