#include "ir/attrs.h"

#include <algorithm>

namespace dg {

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) {
  for (auto& [k, v] : items) set(k, v);
}

void Attrs::set(const std::string& name, AttrValue value) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& e, const std::string& n) { return e.first < n; });
  if (it != entries_.end() && it->first == name) {
    it->second = std::move(value);
  } else {
    entries_.insert(it, {name, std::move(value)});
  }
}

const AttrValue* Attrs::find(const std::string& name) const {
  for (auto& e : entries_)
    if (e.first == name) return &e.second;
  return nullptr;
}

bool Attrs::has(const std::string& name) const { return find(name) != nullptr; }

template <class T>
static std::optional<T> get_as(const Attrs& a, const std::string& name) {
  const AttrValue* v = a.find(name);
  if (!v || !std::holds_alternative<T>(*v)) return std::nullopt;
  return std::get<T>(*v);
}

std::optional<int64_t> Attrs::get_int(const std::string& n) const {
  return get_as<int64_t>(*this, n);
}
std::optional<double> Attrs::get_float(const std::string& n) const {
  if (auto i = get_int(n)) return static_cast<double>(*i);
  return get_as<double>(*this, n);
}
std::optional<std::vector<int64_t>> Attrs::get_ints(const std::string& n) const {
  return get_as<std::vector<int64_t>>(*this, n);
}
std::optional<std::vector<SymExpr>> Attrs::get_syms(const std::string& n) const {
  if (auto ints = get_ints(n)) return std::vector<SymExpr>(ints->begin(), ints->end());
  return get_as<std::vector<SymExpr>>(*this, n);
}
std::optional<DType> Attrs::get_dtype(const std::string& n) const {
  return get_as<DType>(*this, n);
}

bool Attrs::operator==(const Attrs& other) const { return entries_ == other.entries_; }

}  // namespace dg
