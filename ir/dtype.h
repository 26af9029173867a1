// Element types. The numeric values are part of graph.fbs: append only, never renumber.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace dg {

#define DG_DTYPES(X)           \
  X(kBF16, 1, "bf16", 2, true) \
  X(kF16, 2, "f16", 2, true)   \
  X(kF32, 3, "f32", 4, true)   \
  X(kF64, 4, "f64", 8, true)   \
  X(kI64, 5, "i64", 8, false)  \
  X(kI32, 6, "i32", 4, false)  \
  X(kBool, 7, "bool", 1, false)

enum class DType : uint8_t {
#define DG_DTYPE_ENUM(name, value, text, bytes, is_float) name = value,
  DG_DTYPES(DG_DTYPE_ENUM)
#undef DG_DTYPE_ENUM
};

std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
std::optional<DType> dtype_from_code(uint32_t code);
int dtype_size(DType t);
bool dtype_is_float(DType t);
// The C type codegen uses for storage of this dtype.
std::string_view dtype_c_type(DType t);

}  // namespace dg
