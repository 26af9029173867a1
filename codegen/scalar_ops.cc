#include "codegen/scalar_ops.h"

#include <string_view>

namespace dg {
namespace {

struct Spelling {
  OpKind op;
  std::string_view pattern;  // $0, $1, $2 stand for the operands
};

// The dg_* functions live in codegen/device/dg_ops.cuh, overloaded for float and double.
constexpr Spelling kSpellings[] = {
    {OpKind::kNeg, "(-$0)"},
    {OpKind::kExp, "dg_exp($0)"},
    {OpKind::kLog, "dg_log($0)"},
    {OpKind::kSqrt, "dg_sqrt($0)"},
    {OpKind::kRsqrt, "dg_rsqrt($0)"},
    {OpKind::kReciprocal, "dg_reciprocal($0)"},
    {OpKind::kAbs, "dg_abs($0)"},
    {OpKind::kRelu, "dg_relu($0)"},
    {OpKind::kTanh, "dg_tanh($0)"},
    // In f32 on the SFU: Note [Sigmoid on the special-function unit] in codegen/device/dg_ops.cuh.
    {OpKind::kSigmoid, "dg_sigmoid($0)"},
    {OpKind::kSilu, "dg_silu($0)"},
    {OpKind::kGelu, "dg_gelu($0)"},
    {OpKind::kAdd, "($0 + $1)"},
    {OpKind::kSub, "($0 - $1)"},
    {OpKind::kMul, "($0 * $1)"},
    {OpKind::kDiv, "($0 / $1)"},
    {OpKind::kMaximum, "dg_maximum($0, $1)"},
    {OpKind::kMinimum, "dg_minimum($0, $1)"},
    {OpKind::kPow, "dg_pow($0, $1)"},
    {OpKind::kSiluBackward, "dg_silu_backward($0, $1)"},
    {OpKind::kSigmoidBackward, "dg_sigmoid_backward($0, $1)"},
    {OpKind::kEq, "($0 == $1)"},
    {OpKind::kNe, "($0 != $1)"},
    {OpKind::kLt, "($0 < $1)"},
    {OpKind::kLe, "($0 <= $1)"},
    {OpKind::kGt, "($0 > $1)"},
    {OpKind::kGe, "($0 >= $1)"},
    {OpKind::kWhere, "($0 ? $1 : $2)"},
    {OpKind::kSin, "dg_sin($0)"},
    {OpKind::kCos, "dg_cos($0)"},
    {OpKind::kErf, "dg_erf($0)"},
    {OpKind::kSinc, "dg_sinc($0)"},
    {OpKind::kGeluTanh, "dg_gelu_tanh($0)"},
    {OpKind::kGeluBackward, "dg_gelu_backward($0, $1)"},
    {OpKind::kGeluTanhBackward, "dg_gelu_tanh_backward($0, $1)"},
};

}  // namespace

std::string scalar_expr(OpKind op, const std::vector<std::string>& args) {
  for (const Spelling& s : kSpellings) {
    if (s.op != op) continue;
    std::string out;
    for (size_t i = 0; i < s.pattern.size(); ++i) {
      if (s.pattern[i] == '$' && i + 1 < s.pattern.size()) {
        out += args.at(s.pattern[++i] - '0');
      } else {
        out += s.pattern[i];
      }
    }
    return out;
  }
  return "";
}

}  // namespace dg
