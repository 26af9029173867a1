#include "runtime/reference/reference_eval.h"

#include <exception>
#include <map>
#include <new>
#include <optional>
#include <string>

#include "ir/verifier.h"
#include "runtime/reference/ref_ops.h"

namespace dg {
namespace {

using ref::SymEnv;

// Largest tensor the evaluator allocates; a bigger one is an error, not an out-of-memory kill.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 32;

std::string vid(ValueId id) { return "%" + std::to_string(id); }

// Binds symbols from the inputs and checks them (Note [Binding inputs]).
class Binder {
 public:
  explicit Binder(const Graph& g) : g_(g) {}

  std::string bind(const std::vector<HostTensor>& inputs) {
    if (inputs.size() != g_.inputs.size())
      return "graph takes " + std::to_string(g_.inputs.size()) + " inputs, got " +
             std::to_string(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      if (auto e = bind_one(g_.value(g_.inputs[i]), inputs[i], where(i)); !e.empty()) return e;
    for (const SymExpr& s : g_.symbols) {
      auto it = env_.find(s.symbol_name());
      if (it == env_.end()) continue;
      Interval r = s.symbol_range();
      int64_t div = s.symbol_divisor();
      if (!r.contains(it->second) || (div > 1 && it->second % div != 0))
        return "symbol " + s.symbol_name() + " = " + std::to_string(it->second) + " (from " +
               origin_[s.symbol_name()] + ") violates its facts: range [" + bound(r.lo) + ", " +
               bound(r.hi) + "], multiple of " + std::to_string(div);
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      if (auto e = check_one(g_.value(g_.inputs[i]), inputs[i], where(i)); !e.empty()) return e;
    return "";
  }
  const SymEnv& env() const { return env_; }

 private:
  std::string where(size_t i) const {
    return "input " + std::to_string(i) + " (" + vid(g_.inputs[i]) + ")";
  }
  static std::string bound(int64_t v) {
    if (v == Interval::kNegInf) return "-inf";
    if (v == Interval::kPosInf) return "inf";
    return std::to_string(v);
  }

  std::string bind_sym(const SymExpr& e, int64_t v, const std::string& at) {
    if (!e.is_symbol()) return "";
    auto [it, fresh] = env_.emplace(e.symbol_name(), v);
    if (fresh) {
      origin_[e.symbol_name()] = at;
    } else if (it->second != v) {
      return at + " is " + std::to_string(v) + ", but symbol " + e.symbol_name() + " is " +
             std::to_string(it->second) + " from " + origin_[e.symbol_name()];
    }
    return "";
  }

  std::string bind_one(const Value& v, const HostTensor& t, const std::string& at) {
    if (v.kind == ValueKind::kSymInt) {
      if (t.dtype != DType::kI64 || t.rank() != 0 || !t.consistent())
        return at + " is a symbolic integer: pass a rank-0 i64 tensor (make_sym_int), got " +
               t.to_string();
      return bind_sym(v.sym_value, t.get_int(0), at);
    }
    const TensorType& type = v.type;
    if (t.dtype != type.dtype || t.rank() != type.rank())
      return at + " should be " + type.to_string() + ", got " + t.to_string();
    if (!t.consistent())
      return at + ": " + t.to_string() + " has " + std::to_string(t.bytes.size()) +
             " bytes, which does not match its shape";
    for (int d = 0; d < t.rank(); ++d)
      if (auto e = bind_sym(type.shape[d], t.shape[d], at + " dim " + std::to_string(d));
          !e.empty())
        return e;
    return "";
  }

  std::string check_dim(const SymExpr& e, int64_t actual, const std::string& at) {
    std::optional<int64_t> want = e.evaluate(env_);
    if (!want)
      return at + ": cannot evaluate " + e.to_string() +
             " (a symbol no input dim binds on its own)";
    if (*want != actual)
      return at + " is " + std::to_string(actual) + ", but " + e.to_string() + " = " +
             std::to_string(*want);
    return "";
  }

  std::string check_one(const Value& v, const HostTensor& t, const std::string& at) {
    if (v.kind == ValueKind::kSymInt) return check_dim(v.sym_value, t.get_int(0), at);
    for (int d = 0; d < t.rank(); ++d)
      if (auto e = check_dim(v.type.shape[d], t.shape[d], at + " dim " + std::to_string(d));
          !e.empty())
        return e;
    return "";
  }

  const Graph& g_;
  SymEnv env_;
  std::map<std::string, std::string> origin_;  // symbol -> where it was bound
};

std::string eval_node(const ref::OpArgs& a) {
  switch (op_info(a.node.op).category) {
    case OpCategory::kCreate:
      return ref::eval_create(a);
    case OpCategory::kCast:
      return ref::eval_cast(a);
    case OpCategory::kUnary:
    case OpCategory::kBinary:
    case OpCategory::kCompare:
    case OpCategory::kWhere:
      return ref::eval_elementwise(a);
    case OpCategory::kMatmul:
      return ref::eval_matmul(a);
    case OpCategory::kReduce:
      return ref::eval_reduce(a);
    case OpCategory::kLayout:
      return ref::eval_layout(a);
    case OpCategory::kIndex:
      return ref::eval_index(a);
    case OpCategory::kGrouped:
      return ref::eval_grouped(a);
  }
  return "no reference implementation";
}

// Allocates a node's result: its declared type with every dim evaluated.
std::string allocate(const TensorType& type, const SymEnv& env, HostTensor* out) {
  std::vector<int64_t> shape;
  std::string error;
  if (!ref::eval_syms(type.shape, env, &shape, &error)) return error;
  HostTensor t{type.dtype, shape, {}};
  int64_t n = t.numel(), bytes = 0;
  if (n < 0 || __builtin_mul_overflow(n, int64_t{dtype_size(type.dtype)}, &bytes) ||
      bytes > kMaxTensorBytes)
    return "result " + t.to_string() + " is negative or too large to allocate";
  t.bytes.assign(static_cast<size_t>(bytes), 0);
  *out = std::move(t);
  return "";
}

}  // namespace

RefResult reference_eval(const Graph& g, const std::vector<HostTensor>& inputs) {
  RefResult result;
  if (std::string e = verify_graph(g); !e.empty()) {
    result.error = "invalid graph: " + e;
    return result;
  }
  Binder binder(g);
  if (std::string e = binder.bind(inputs); !e.empty()) {
    result.error = e;
    return result;
  }
  std::vector<const HostTensor*> slot(g.values.size(), nullptr);
  std::vector<HostTensor> owned(g.values.size());
  for (size_t i = 0; i < inputs.size(); ++i) slot[static_cast<size_t>(g.inputs[i])] = &inputs[i];

  for (const Node& node : g.nodes) {
    std::string what = vid(node.output) + " = " + std::string(op_name(node.op)) + ": ";
    HostTensor& out = owned[static_cast<size_t>(node.output)];
    std::string e;
    try {
      e = allocate(g.tensor(node.output), binder.env(), &out);
      if (e.empty()) {
        ref::OpArgs args{g, node, {}, binder.env(), &out};
        for (ValueId in : node.inputs) args.in.push_back(slot[static_cast<size_t>(in)]);
        e = eval_node(args);
      }
    } catch (const std::bad_alloc&) {
      e = "out of memory";
    } catch (const std::exception& ex) {
      e = ex.what();
    }
    if (!e.empty()) {
      result.error = what + e;
      return result;
    }
    slot[static_cast<size_t>(node.output)] = &out;
  }
  for (ValueId id : g.outputs) result.outputs.push_back(*slot[static_cast<size_t>(id)]);
  return result;
}

namespace ref {

Compute compute_of(DType dtype) {
  if (dtype == DType::kF64) return Compute::kDouble;
  return dtype_is_float(dtype) ? Compute::kFloat : Compute::kInt;
}

bool eval_syms(const std::vector<SymExpr>& exprs, const SymEnv& env, std::vector<int64_t>* out,
               std::string* error) {
  out->clear();
  for (const SymExpr& e : exprs) {
    std::optional<int64_t> v = e.evaluate(env);
    if (!v) {
      *error = "cannot evaluate " + e.to_string() + " (unbound symbol or overflow)";
      return false;
    }
    out->push_back(*v);
  }
  return true;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
}

bool broadcast_strides(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape,
                       std::vector<int64_t>* strides) {
  if (in_shape.size() > out_shape.size()) return false;
  std::vector<int64_t> contiguous = contiguous_strides(in_shape);
  strides->assign(out_shape.size(), 0);
  size_t lead = out_shape.size() - in_shape.size();
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (in_shape[d] == out_shape[lead + d]) {
      (*strides)[lead + d] = in_shape[d] == 1 ? 0 : contiguous[d];
    } else if (in_shape[d] != 1) {
      return false;
    }
  }
  return true;
}

int64_t norm_axis(int64_t axis, int64_t rank) {
  if (axis < 0) axis += rank;
  return (axis < 0 || axis >= rank) ? -1 : axis;
}

}  // namespace ref
}  // namespace dg
