#include "ir/dtype.h"

namespace dg {

std::string_view dtype_name(DType t) {
  switch (t) {
#define DG_DTYPE_NAME(name, value, text, bytes, is_float) \
  case DType::name:                                       \
    return text;
    DG_DTYPES(DG_DTYPE_NAME)
#undef DG_DTYPE_NAME
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view n) {
#define DG_DTYPE_PARSE(name, value, text, bytes, is_float) \
  if (n == text) return DType::name;
  DG_DTYPES(DG_DTYPE_PARSE)
#undef DG_DTYPE_PARSE
  return std::nullopt;
}

std::optional<DType> dtype_from_code(uint32_t code) {
#define DG_DTYPE_CODE(name, value, text, bytes, is_float) \
  if (code == value) return DType::name;
  DG_DTYPES(DG_DTYPE_CODE)
#undef DG_DTYPE_CODE
  return std::nullopt;
}

int dtype_size(DType t) {
  switch (t) {
#define DG_DTYPE_SIZE(name, value, text, bytes, is_float) \
  case DType::name:                                       \
    return bytes;
    DG_DTYPES(DG_DTYPE_SIZE)
#undef DG_DTYPE_SIZE
  }
  return 0;
}

bool dtype_is_float(DType t) {
  switch (t) {
#define DG_DTYPE_FLOAT(name, value, text, bytes, is_float) \
  case DType::name:                                        \
    return is_float;
    DG_DTYPES(DG_DTYPE_FLOAT)
#undef DG_DTYPE_FLOAT
  }
  return false;
}

std::string_view dtype_c_type(DType t) {
  switch (t) {
    case DType::kBF16:
      return "dg_bf16";
    case DType::kF16:
      return "dg_f16";
    case DType::kF32:
      return "float";
    case DType::kF64:
      return "double";
    case DType::kI64:
      return "long long";
    case DType::kI32:
      return "int";
    case DType::kBool:
      return "bool";
  }
  return "void";
}

}  // namespace dg
