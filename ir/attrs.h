// Op attributes: a small generic name -> value table (no per-op option structs).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/dtype.h"
#include "ir/sym_expr.h"

namespace dg {

// One attribute value. Integers and integer lists that may be symbolic are stored as SymExprs
// (shape-like attributes such as reshape's target shape); plain ints for axes and flags.
using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::vector<SymExpr>, DType>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items);

  void set(const std::string& name, AttrValue value);
  bool has(const std::string& name) const;
  const AttrValue* find(const std::string& name) const;

  std::optional<int64_t> get_int(const std::string& name) const;
  std::optional<double> get_float(const std::string& name) const;
  std::optional<std::vector<int64_t>> get_ints(const std::string& name) const;
  std::optional<std::vector<SymExpr>> get_syms(const std::string& name) const;
  std::optional<DType> get_dtype(const std::string& name) const;

  // Entries sorted by name: printing, hashing and serialization are deterministic.
  const std::vector<std::pair<std::string, AttrValue>>& entries() const { return entries_; }
  bool operator==(const Attrs& other) const;

 private:
  std::vector<std::pair<std::string, AttrValue>> entries_;
};

}  // namespace dg
