// Internal: the elementwise operands of a GEMM epilogue (Note [Epilogue operand loads] in
// codegen/device/dg_epilogue_loads.cuh): how the epilogue body reads one, and the declaration of
// the stores that carry them to the tensor-core epilogue drivers, which load them a fragment at a
// time.
#pragma once
#include <string>
#include <vector>

#include "codegen/gemm_spec.h"

namespace dg {

// The body's read of `param`[`offset`], an operand of the output's shape at (row, col) held in
// `buffer`: `dg_in<k>(dg_st, param + (offset))`, k its position in `operands`, added if new.
std::string epilogue_operand_read(std::vector<EpilogueOperand>& operands, BufferRef buffer,
                                  DType dtype, const std::string& param, const std::string& offset);
// Declares `dg_stores`, of type `stores`, as a DgEpilogueIo with spec.operands' pointers when it
// has operands. When `stores` pair (DgPairs), the operands of a type read in pairs are too, their
// base addresses checked by the host with the outputs' (Note [GEMM fallbacks]).
std::string epilogue_io_declaration(const GemmKernelSpec& spec, KernelParams& params,
                                    const std::string& stores, bool paired);

}  // namespace dg
