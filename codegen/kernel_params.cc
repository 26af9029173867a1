// A kernel's pointer parameters (KernelParams).
#include "codegen/kernel_params.h"

#include <algorithm>

#include "codegen/c_expr.h"

namespace dg {

int KernelParams::position(BufferRef buffer, DType dtype, bool output) {
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i] == buffer) return static_cast<int>(i);
  std::string name = (output ? "o" : "p") + std::to_string(buffers_.size());
  buffers_.push_back(buffer);
  names_.push_back(name);
  decls_.push_back((output ? "" : "const ") + ctype(dtype) + "* __restrict__ " + name);
  return static_cast<int>(buffers_.size()) - 1;
}

std::string KernelParams::add(BufferRef buffer, DType dtype, bool output) {
  return names_[position(buffer, dtype, output)];
}

std::string KernelParams::add_checked(BufferRef buffer, DType dtype, const SymExpr& offset) {
  const int param = position(buffer, dtype, false);
  const CheckedOperand checked{param, offset * SymExpr(dtype_size(dtype))};
  if (std::find(checked_.begin(), checked_.end(), checked) == checked_.end())
    checked_.push_back(checked);
  return names_[param] + " + " + c_expr(offset);
}

void KernelParams::check_paired_output(BufferRef buffer, DType dtype) {
  const CheckedOperand checked{position(buffer, dtype, true), SymExpr(0),
                               2 * static_cast<int>(dtype_size(dtype)), true};
  if (std::find(checked_.begin(), checked_.end(), checked) == checked_.end())
    checked_.push_back(checked);
}

void KernelParams::check_paired_operand(BufferRef buffer, DType dtype) {
  const CheckedOperand checked{position(buffer, dtype, false), SymExpr(0),
                               2 * static_cast<int>(dtype_size(dtype)), false, true};
  if (std::find(checked_.begin(), checked_.end(), checked) == checked_.end())
    checked_.push_back(checked);
}

std::string KernelParams::declaration() const {
  std::string s;
  for (size_t i = 0; i < decls_.size(); ++i) s += (i ? ", " : "") + decls_[i];
  return s;
}

}  // namespace dg
