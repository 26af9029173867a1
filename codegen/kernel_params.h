// Internal: a kernel's pointer parameters, built up as its emitter meets the buffers it reads and
// writes (the GEMM emitters and the pointwise and reduction groups of codegen/emit_group.cc).
#pragma once
#include <string>
#include <vector>

#include "codegen/lowering.h"

namespace dg {

// Pointer parameters of one kernel, in order; a buffer read twice is passed once.
class KernelParams {
 public:
  // The parameter's name; `output` makes it writable.
  std::string add(BufferRef buffer, DType dtype, bool output);
  // As add, for a read whose address (buffer + offset elements) the kernel checks for 16-byte
  // alignment at run time; the launch reports it (Note [Unaligned operands] in kernel_plan.h).
  // Returns that address as a C expression, "p1 + offset".
  std::string add_checked(BufferRef buffer, DType dtype, const SymExpr& offset);
  // Records that the kernel writes `buffer` (already a parameter) in pairs of `dtype` elements
  // when its base is aligned to a pair, checked at run time (Note [Paired stores] in
  // codegen/device/dg_store.cuh).
  void check_paired_output(BufferRef buffer, DType dtype);
  // Likewise for an epilogue operand (already a parameter) read in pairs (Note [Epilogue operand
  // loads] in codegen/device/dg_epilogue_loads.cuh).
  void check_paired_operand(BufferRef buffer, DType dtype);
  std::string declaration() const;  // "T* __restrict__ o0, const U* __restrict__ p1, ..."
  const std::vector<BufferRef>& buffers() const { return buffers_; }
  const std::vector<CheckedOperand>& checked_operands() const { return checked_; }

 private:
  // The buffer's position among the parameters, adding it if it is new.
  int position(BufferRef buffer, DType dtype, bool output);

  std::vector<BufferRef> buffers_;
  std::vector<CheckedOperand> checked_;
  std::vector<std::string> names_, decls_;
};

}  // namespace dg
