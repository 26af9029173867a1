// The elementwise operands of a GEMM epilogue (codegen/epilogue_operands.h).
#include "codegen/c_expr.h"
#include "codegen/epilogue_operands.h"

namespace dg {

std::string epilogue_operand_read(std::vector<EpilogueOperand>& operands, BufferRef buffer,
                                  DType dtype, const std::string& param,
                                  const std::string& offset) {
  size_t k = 0;
  while (k < operands.size() && operands[k].param != param) ++k;
  if (k == operands.size()) operands.push_back({buffer, dtype, param});
  return "dg_in<" + std::to_string(k) + ">(dg_st, " + param + " + (" + offset + "))";
}

namespace {
// DgOperandPair's types with a pair load (codegen/device/dg_epilogue_loads.cuh).
bool read_in_pairs(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }
}  // namespace

std::string epilogue_io_declaration(const GemmKernelSpec& spec, KernelParams& params,
                                    const std::string& stores, bool paired) {
  if (spec.operands.empty()) return "  " + stores + " dg_stores;\n";
  // The body's reads are at c_base + row * N + col (codegen/emit_group.cc); a paired kernel's N
  // is even, so the pairs of an aligned base are aligned.
  std::string types, pointers;
  for (const EpilogueOperand& op : spec.operands) {
    types += ", " + ctype(op.dtype);
    pointers += ", " + op.param + " + c_base";
    if (paired && read_in_pairs(op.dtype)) params.check_paired_operand(op.buffer, op.dtype);
  }
  return "  DgEpilogueIo<" + stores + types + "> dg_stores(" + c_expr(spec.N) + pointers + ");\n";
}

}  // namespace dg
