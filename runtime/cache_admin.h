// Management of a kernel-cache folder, for `dyngen cache stats|verify|clear` and for CI.
// Only files named like entries ("<sha256>.dgk") or their temporaries are ever touched; any other
// file is an "other" file: ignored by get(), reported by stats and verify, kept by clear
// (Note [Only our files]).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace dg {

struct CacheStats {
  std::string dir;
  bool exists = false;
  uint64_t entries = 0;      // files named like entries (not verified; see cache_verify)
  uint64_t bytes = 0;        // their total size
  uint64_t temp_files = 0;   // writes in flight or left by crashed writers
  uint64_t other_files = 0;  // anything else in the folder
};

struct CorruptEntry {
  std::string file;    // name inside the folder
  std::string reason;  // entry_check_name(), or a read error
};

struct CacheVerifyReport {
  std::string dir;
  bool exists = false;
  uint64_t valid = 0;
  uint64_t corrupt = 0;
  uint64_t removed = 0;  // corrupt entries and stale temporaries removed
  uint64_t temp_files = 0;
  std::vector<CorruptEntry> corrupt_entries;
  std::vector<std::string> other_files;
};

struct CacheClearReport {
  std::string dir;
  uint64_t removed = 0;  // entries and temporaries
  uint64_t bytes = 0;
  uint64_t failed = 0;  // files that could not be removed
};

// A temporary older than this is taken to be left by a crashed writer.
inline constexpr int64_t kStaleTempSeconds = 3600;

// Counts the folder's files. A folder that does not exist is empty, not an error.
Result<CacheStats> cache_stats(const std::string& dir);

// Reads and verifies every entry: format, checksum, and that its name is the hash of the key it
// stores. With `remove_corrupt`, deletes corrupt entries and stale temporaries.
Result<CacheVerifyReport> cache_verify(const std::string& dir, bool remove_corrupt);

// Removes every entry and temporary file. Other files and the folder itself stay.
Result<CacheClearReport> cache_clear(const std::string& dir);

}  // namespace dg
