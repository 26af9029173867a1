#include "runtime/memory_cache.h"

#include <exception>

namespace dg {

// Note [Memory cache never throws]
// Allocation failure is the only thing that can throw here; get() then reports a miss and put()
// keeps nothing, which callers handle anyway (the kernel is recompiled or read from disk).
std::optional<std::string> MemoryCache::get(std::string_view key) {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void MemoryCache::put(std::string_view key, std::string_view value) {
  const size_t item_bytes = key.size() + value.size();
  std::lock_guard<std::mutex> lock(mu_);
  try {
    auto it = index_.find(key);
    if (it != index_.end()) {
      bytes_ -= it->second->first.size() + it->second->second.size();
      lru_.erase(it->second);
      index_.erase(it);
    }
    if (item_bytes > capacity_bytes_) return;
    lru_.emplace_front(std::string(key), std::string(value));
    try {
      index_.emplace(lru_.front().first, lru_.begin());
    } catch (...) {
      lru_.pop_front();  // keep the list and the index in step
      throw;
    }
    bytes_ += item_bytes;
    evict_locked();
  } catch (const std::exception&) {
    // Dropped: the entry is compiled again next time (Note [Memory cache never throws]).
  }
}

bool MemoryCache::erase(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  bytes_ -= it->second->first.size() + it->second->second.size();
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

void MemoryCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lru_.clear();
  index_.clear();
  bytes_ = 0;
}

size_t MemoryCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.size();
}

size_t MemoryCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void MemoryCache::evict_locked() {
  while (bytes_ > capacity_bytes_ && !lru_.empty()) {
    const Item& victim = lru_.back();
    bytes_ -= victim.first.size() + victim.second.size();
    index_.erase(victim.first);
    lru_.pop_back();
  }
}

}  // namespace dg
