#include "runtime/cache_entry.h"

#include <array>
#include <cstring>

#include "ir/sha256.h"

namespace dg {
namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_le(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<uint8_t>(in[at + i])) << (8 * i);
  return v;
}

std::array<uint8_t, 32> checksum(std::string_view payload) {
  Sha256 h;
  h.update(payload);
  return h.finish();
}

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string encode_cache_entry(std::string_view key, std::string_view payload) {
  std::string out;
  out.reserve(kCacheHeaderBytes + key.size() + payload.size());
  out.append(kCacheMagic, sizeof kCacheMagic);
  put_le(out, kCacheFormatVersion, 4);
  put_le(out, key.size(), 4);
  out.append(key);
  put_le(out, payload.size(), 8);
  const std::array<uint8_t, 32> sum = checksum(payload);
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  out.append(payload);
  return out;
}

DecodedEntry decode_cache_entry(std::string_view bytes, const std::string_view* expected_key) {
  DecodedEntry d;
  if (bytes.size() < kCacheHeaderBytes ||
      std::memcmp(bytes.data(), kCacheMagic, sizeof kCacheMagic) != 0) {
    d.check = EntryCheck::kNotAnEntry;
    return d;
  }
  if (get_le(bytes, 8, 4) != kCacheFormatVersion) {
    d.check = EntryCheck::kUnsupportedVersion;
    return d;
  }
  const uint64_t key_len = get_le(bytes, 12, 4);
  if (key_len == 0 || key_len > kCacheMaxKeyBytes || kCacheHeaderBytes + key_len > bytes.size()) {
    d.check = EntryCheck::kBadKeyLength;
    return d;
  }
  const std::string_view key = bytes.substr(16, key_len);
  const uint64_t payload_len = get_le(bytes, 16 + key_len, 8);
  // Compare without overflow: the remaining bytes after the header and key must be the payload.
  if (payload_len != bytes.size() - kCacheHeaderBytes - key_len) {
    d.check = EntryCheck::kSizeMismatch;
    return d;
  }
  d.key = key;
  if (expected_key != nullptr && key != *expected_key) {
    d.check = EntryCheck::kKeyMismatch;
    return d;
  }
  const std::string_view stored_sum = bytes.substr(24 + key_len, 32);
  const std::string_view payload = bytes.substr(56 + key_len);
  const std::array<uint8_t, 32> sum = checksum(payload);
  if (std::memcmp(stored_sum.data(), sum.data(), sum.size()) != 0) {
    d.check = EntryCheck::kChecksumMismatch;
    return d;
  }
  d.payload = payload;
  d.check = EntryCheck::kValid;
  return d;
}

const char* entry_check_name(EntryCheck check) {
  switch (check) {
    case EntryCheck::kValid:
      return "valid";
    case EntryCheck::kNotAnEntry:
      return "not a cache entry";
    case EntryCheck::kUnsupportedVersion:
      return "unsupported format version";
    case EntryCheck::kBadKeyLength:
      return "bad key length";
    case EntryCheck::kSizeMismatch:
      return "size mismatch (truncated?)";
    case EntryCheck::kKeyMismatch:
      return "key mismatch";
    case EntryCheck::kChecksumMismatch:
      return "checksum mismatch";
  }
  return "unknown";
}

std::string entry_file_name(std::string_view key) {
  return sha256_hex(key) + std::string(kCacheEntrySuffix);
}

bool is_entry_file_name(std::string_view name) {
  return name.size() == 64 + kCacheEntrySuffix.size() && is_hex64(name.substr(0, 64)) &&
         name.substr(64) == kCacheEntrySuffix;
}

bool is_temp_file_name(std::string_view name) {
  return name.size() > 64 + kCacheTempInfix.size() && is_hex64(name.substr(0, 64)) &&
         name.substr(64, kCacheTempInfix.size()) == kCacheTempInfix;
}

}  // namespace dg
