// SHA-256, used for the canonical graph hash, cache keys and cache-entry checksums. OpenSSL's
// libcrypto computes it (Note [SHA-256 from libcrypto] in sha256.cc).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace dg {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::array<uint8_t, 32> finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Lowercase hex digest of `data`.
std::string sha256_hex(std::string_view data);
std::string to_hex(const uint8_t* bytes, size_t n);

}  // namespace dg
