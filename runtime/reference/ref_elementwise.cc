// Reference for the elementwise categories: create, cast, unary, binary, compare and where.
#include <cmath>
#include <limits>

#include "ir/shape_infer.h"
#include "runtime/reference/ref_ops.h"

namespace dg::ref {
namespace {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
T float_unary(OpKind op, T x) {
  switch (op) {
    case OpKind::kNeg:
      return -x;
    case OpKind::kExp:
      return std::exp(x);
    case OpKind::kLog:
      return std::log(x);
    case OpKind::kSqrt:
      return std::sqrt(x);
    case OpKind::kRsqrt:
      return T(1) / std::sqrt(x);
    case OpKind::kReciprocal:
      return T(1) / x;
    case OpKind::kAbs:
      return std::fabs(x);
    case OpKind::kRelu:
      return std::isnan(x) || x > 0 ? x : T(0);
    case OpKind::kTanh:
      return std::tanh(x);
    case OpKind::kSigmoid:
      return sigmoid(x);
    case OpKind::kSilu:
      return x / (T(1) + std::exp(-x));
    case OpKind::kGelu:
      return x * T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
    case OpKind::kSin:
      return std::sin(x);
    case OpKind::kCos:
      return std::cos(x);
    case OpKind::kErf:
      return std::erf(x);
    case OpKind::kSinc: {
      if (x == T(0)) return T(1);
      T px = x * T(M_PI);
      return std::sin(px) / px;
    }
    case OpKind::kGeluTanh: {
      const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
      return T(0.5) * x * (T(1) + std::tanh(beta * (x + kappa * x * x * x)));
    }
    default:
      return std::numeric_limits<T>::quiet_NaN();
  }
}

template <class T>
T float_binary(OpKind op, T x, T y) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  switch (op) {
    case OpKind::kAdd:
      return x + y;
    case OpKind::kSub:
      return x - y;
    case OpKind::kMul:
      return x * y;
    case OpKind::kDiv:
      return x / y;
    case OpKind::kMaximum:
      return std::isnan(x) || std::isnan(y) ? nan : (x > y ? x : y);
    case OpKind::kMinimum:
      return std::isnan(x) || std::isnan(y) ? nan : (x < y ? x : y);
    case OpKind::kPow:
      return std::pow(x, y);
    case OpKind::kSiluBackward: {
      T s = sigmoid(y);
      return x * s * (T(1) + y * (T(1) - s));
    }
    case OpKind::kSigmoidBackward:
      return x * (T(1) - y) * y;
    case OpKind::kGeluBackward: {  // x: grad, y: the input
      T cdf = T(0.5) * (T(1) + std::erf(y * T(M_SQRT1_2)));
      T pdf = T(M_2_SQRTPI * M_SQRT1_2 * 0.5) * std::exp(T(-0.5) * y * y);
      return x * (cdf + y * pdf);
    }
    case OpKind::kGeluTanhBackward: {
      const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
      T t = std::tanh(beta * (y + kappa * y * y * y));
      T inner_derivative = beta * (T(1) + T(3) * kappa * y * y);
      return x * (T(0.5) * (T(1) + t) + T(0.5) * y * (T(1) - t * t) * inner_derivative);
    }
    default:
      return nan;
  }
}

// Integer arithmetic wraps (two's complement), as PyTorch's integer kernels do in practice.
int64_t int_unary(OpKind op, int64_t x) {
  int64_t neg = static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(x));
  return op == OpKind::kNeg || x < 0 ? neg : x;  // neg or abs
}

int64_t int_binary(OpKind op, int64_t x, int64_t y) {
  uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  switch (op) {
    case OpKind::kAdd:
      return static_cast<int64_t>(ux + uy);
    case OpKind::kSub:
      return static_cast<int64_t>(ux - uy);
    case OpKind::kMul:
      return static_cast<int64_t>(ux * uy);
    case OpKind::kMaximum:
      return x > y ? x : y;
    default:
      return x < y ? x : y;  // kMinimum
  }
}

bool int_supported(OpKind op) {
  switch (op) {
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kMaximum:
    case OpKind::kMinimum:
      return true;
    default:
      return false;
  }
}

template <class T>
bool compare(OpKind op, T x, T y) {
  switch (op) {
    case OpKind::kEq:
      return x == y;
    case OpKind::kNe:
      return x != y;
    case OpKind::kLt:
      return x < y;
    case OpKind::kLe:
      return x <= y;
    case OpKind::kGt:
      return x > y;
    default:
      return x >= y;  // kGe
  }
}

template <class T>
T unary(OpKind op, T x) {
  if constexpr (std::is_same_v<T, int64_t>)
    return int_unary(op, x);
  else
    return float_unary(op, x);
}

template <class T>
T binary(OpKind op, T x, T y) {
  if constexpr (std::is_same_v<T, int64_t>)
    return int_binary(op, x, y);
  else
    return float_binary(op, x, y);
}

// Runs one elementwise node with compute type T; `strides` broadcast each operand to the output.
template <class T>
void run(const OpArgs& a, const std::vector<std::vector<int64_t>>& strides) {
  HostTensor& out = *a.out;
  const OpKind op = a.node.op;
  const auto& in = a.in;
  switch (op_info(op).category) {
    case OpCategory::kUnary:
      for_each_index(out.shape, strides, {}, [&](int64_t i, const int64_t* off) {
        store_element<T>(out, i, unary<T>(op, load_element<T>(*in[0], off[0])));
      });
      break;
    case OpCategory::kBinary:
      for_each_index(out.shape, strides, {}, [&](int64_t i, const int64_t* off) {
        T x = load_element<T>(*in[0], off[0]), y = load_element<T>(*in[1], off[1]);
        store_element<T>(out, i, binary<T>(op, x, y));
      });
      break;
    case OpCategory::kCompare:
      for_each_index(out.shape, strides, {}, [&](int64_t i, const int64_t* off) {
        T x = load_element<T>(*in[0], off[0]), y = load_element<T>(*in[1], off[1]);
        store_element<int64_t>(out, i, compare<T>(op, x, y) ? 1 : 0);
      });
      break;
    default:  // kWhere
      for_each_index(out.shape, strides, {}, [&](int64_t i, const int64_t* off) {
        int k = load_element<int64_t>(*in[0], off[0]) != 0 ? 1 : 2;
        store_element<T>(out, i, load_element<T>(*in[k], off[k]));
      });
      break;
  }
}

}  // namespace

std::string eval_create(const OpArgs& a) {
  if (a.node.op == OpKind::kSymConstant) {
    std::vector<int64_t> v;
    std::string error;
    if (!eval_syms(*a.node.attrs.get_syms("value"), a.env, &v, &error)) return error;
    if (dtype_is_float(a.out->dtype))
      store_element<double>(*a.out, 0, static_cast<double>(v[0]));
    else
      store_element<int64_t>(*a.out, 0, v[0]);
    return "";
  }
  auto value = a.node.attrs.get_float("value");
  if (!value) return "missing attribute value";
  int64_t n = a.out->numel();
  for (int64_t i = 0; i < n; ++i) store_element<double>(*a.out, i, *value);
  return "";
}

std::string eval_cast(const OpArgs& a) {
  const HostTensor& x = *a.in[0];
  if (x.shape != a.out->shape) return "operand shape " + x.to_string() + " differs from result";
  int64_t n = x.numel();
  if (dtype_is_float(x.dtype)) {  // exact in double; the store rounds once (twice to 16-bit)
    for (int64_t i = 0; i < n; ++i) store_element<double>(*a.out, i, load_element<double>(x, i));
  } else {
    for (int64_t i = 0; i < n; ++i) store_element<int64_t>(*a.out, i, load_element<int64_t>(x, i));
  }
  return "";
}

std::string eval_elementwise(const OpArgs& a) {
  const OpKind op = a.node.op;
  const OpCategory cat = op_info(op).category;
  std::vector<std::vector<int64_t>> strides(a.in.size());
  for (size_t k = 0; k < a.in.size(); ++k)
    if (!broadcast_strides(a.in[k]->shape, a.out->shape, &strides[k]))
      return "operand " + a.in[k]->to_string() + " does not broadcast to " + a.out->to_string();
  if (cat == OpCategory::kWhere && a.in[0]->dtype != DType::kBool) return "condition must be bool";

  DType type_of_compute = a.out->dtype;
  if (cat == OpCategory::kCompare)
    type_of_compute =
        promote_types(a.in[0]->dtype, a.in[0]->rank() == 0, a.in[1]->dtype, a.in[1]->rank() == 0);
  switch (compute_of(type_of_compute)) {
    case Compute::kFloat:
      run<float>(a, strides);
      break;
    case Compute::kDouble:
      run<double>(a, strides);
      break;
    case Compute::kInt:
      if ((cat == OpCategory::kUnary || cat == OpCategory::kBinary) && !int_supported(op))
        return "needs a floating-point result, got " + a.out->to_string();
      run<int64_t>(a, strides);
      break;
  }
  return "";
}

}  // namespace dg::ref
