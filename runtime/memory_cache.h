// The in-process kernel cache in front of the disk cache: key -> binary, least recently used
// entries evicted past a byte budget. Thread-safe.
#pragma once
#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace dg {

class MemoryCache {
 public:
  static constexpr size_t kDefaultCapacityBytes = size_t{256} << 20;

  explicit MemoryCache(size_t capacity_bytes = kDefaultCapacityBytes)
      : capacity_bytes_(capacity_bytes) {}
  MemoryCache(const MemoryCache&) = delete;
  MemoryCache& operator=(const MemoryCache&) = delete;

  // A copy of the value, and marks it most recently used.
  std::optional<std::string> get(std::string_view key);
  // Inserts or replaces. A value larger than the whole budget is not kept.
  void put(std::string_view key, std::string_view value);
  // Drops `key`; returns whether it was there.
  bool erase(std::string_view key);
  void clear();

  size_t size() const;
  size_t bytes() const;  // keys plus values
  size_t capacity_bytes() const { return capacity_bytes_; }

 private:
  using Item = std::pair<std::string, std::string>;  // key, value
  // Lets the index be searched with a string_view, without allocating.
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  void evict_locked();

  const size_t capacity_bytes_;
  mutable std::mutex mu_;
  std::list<Item> lru_;  // front = most recently used
  std::unordered_map<std::string, std::list<Item>::iterator, KeyHash, std::equal_to<>> index_;
  size_t bytes_ = 0;
};

}  // namespace dg
