#include "ir/sha256.h"

#include <openssl/evp.h>

#include <stdexcept>

// Note [SHA-256 from libcrypto]
// The digest comes from OpenSSL's EVP interface (Debian's libssl-dev, on every machine the
// toolchain runs on) instead of a hand-written compression function: SHA-256 is SHA-256, so
// every graph hash, cache key and entry checksum is the same bytes as before the switch, and
// the known-answer tests in tests/ir/graph_hash_test.cc pin that.
namespace dg {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("sha256: libcrypto cannot start a SHA-256 digest");
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t size) {
  if (size != 0 && EVP_DigestUpdate(state_->ctx, data, size) != 1)
    throw std::runtime_error("sha256: libcrypto digest update failed");
}

std::array<uint8_t, 32> Sha256::finish() {
  std::array<uint8_t, 32> out{};
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(state_->ctx, out.data(), &n) != 1 || n != out.size())
    throw std::runtime_error("sha256: libcrypto digest final failed");
  return out;
}

std::string to_hex(const uint8_t* bytes, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[bytes[i] >> 4];
    s[2 * i + 1] = digits[bytes[i] & 15];
  }
  return s;
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  auto d = h.finish();
  return to_hex(d.data(), d.size());
}

}  // namespace dg
