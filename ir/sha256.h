// SHA-256, used for the canonical graph hash, cache keys and cache-entry checksums.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dg {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::array<uint8_t, 32> finish();

 private:
  void compress(const uint8_t* block);
  uint32_t h_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lowercase hex digest of `data`.
std::string sha256_hex(std::string_view data);
std::string to_hex(const uint8_t* bytes, size_t n);

}  // namespace dg
