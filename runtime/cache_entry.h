// The on-disk form of one kernel-cache entry, and the names of the files in a cache folder.
// Pure functions: no file-system access here (disk_cache.cc and cache_admin.cc do that).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace dg {

// Note [Cache entry format]
// One file per entry, all integers little-endian:
//
//   offset        size  field
//   0             8     magic "DGKCACHE"
//   8             4     format version (kCacheFormatVersion)
//   12            4     key length K
//   16            K     key bytes
//   16+K          8     payload length P
//   24+K          32    sha256(payload), raw bytes
//   56+K          P     payload (a cubin or NUL-terminated PTX)
//
// The file is named entry_file_name(key) = sha256_hex(key) + ".dgk". The stored key guards
// against a file that is in the wrong place (copied, renamed, a hash collision); the exact size
// catches truncation; the checksum catches torn or damaged payloads, which rename() alone does not
// prevent on network file systems. Any mismatch makes the entry a miss, never an error. A new
// format bumps kCacheFormatVersion; older readers then see misses and overwrite on put.
inline constexpr char kCacheMagic[8] = {'D', 'G', 'K', 'C', 'A', 'C', 'H', 'E'};
inline constexpr uint32_t kCacheFormatVersion = 1;
inline constexpr size_t kCacheHeaderBytes = 8 + 4 + 4 + 8 + 32;  // without key and payload
inline constexpr uint32_t kCacheMaxKeyBytes = 64 * 1024;
inline constexpr std::string_view kCacheEntrySuffix = ".dgk";
inline constexpr std::string_view kCacheTempInfix = ".dgk.tmp.";

// Serializes an entry.
std::string encode_cache_entry(std::string_view key, std::string_view payload);

enum class EntryCheck {
  kValid,
  kNotAnEntry,          // too short or wrong magic (a foreign file)
  kUnsupportedVersion,  // written by another format version
  kBadKeyLength,        // key length out of range
  kSizeMismatch,        // truncated or with trailing bytes
  kKeyMismatch,         // the entry is for another key
  kChecksumMismatch,    // payload damaged
};

const char* entry_check_name(EntryCheck check);

struct DecodedEntry {
  EntryCheck check = EntryCheck::kNotAnEntry;
  std::string_view key;      // views into the decoded bytes; set when check is kValid
  std::string_view payload;  // (key is also set for kKeyMismatch/kChecksumMismatch)
};

// Parses and verifies `bytes`. With `expected_key` non-null, the stored key must equal it.
DecodedEntry decode_cache_entry(std::string_view bytes, const std::string_view* expected_key);

// "<sha256 hex of key>.dgk".
std::string entry_file_name(std::string_view key);
// True for names of the form "<64 lowercase hex>.dgk".
bool is_entry_file_name(std::string_view name);
// True for "<64 hex>.dgk.tmp.<anything>": a put in flight, or left by a crashed writer.
bool is_temp_file_name(std::string_view name);

}  // namespace dg
