// Bounding a kernel-cache folder: `dyngen cache prune --max-size SIZE --older-than DAYS`, and the
// per-architecture / per-compiler view behind `dyngen cache stats` (cache_usage.cc).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "runtime/status.h"

namespace dg {

struct CachePruneOptions {
  // Keep at most this many bytes of entries: the most recently used ones (Note [A hit refreshes
  // an entry] in disk_cache.cc). nullopt: no size bound.
  std::optional<uint64_t> max_bytes;
  // Remove entries not used for longer than this. nullopt: no age bound.
  std::optional<int64_t> older_than_seconds;
  // The current time (seconds since the epoch); 0: now. For tests.
  int64_t now_s = 0;
};

struct CachePruneReport {
  std::string dir;
  bool exists = false;
  uint64_t kept = 0, kept_bytes = 0;
  uint64_t removed = 0, removed_bytes = 0;  // entries, and temporaries older than an hour
  uint64_t failed = 0;                      // files that could not be removed
};

// Note [Pruning never leaves a partial entry]
// Entries are only ever unlinked whole, never rewritten or truncated, so every entry left in the
// folder is one a writer published complete; a reader that opened an entry before the unlink
// still reads all of it. A temporary younger than an hour may be a put in flight and is kept.
// An entry replaced (new inode) after the scan is a fresh publish and is kept.
Result<CachePruneReport> cache_prune(const std::string& dir, const CachePruneOptions& options);

// "123", "64K", "512M", "2G", "1T" (powers of 1024; a trailing "B" or "iB" is accepted):
// bytes, or nullopt for anything else.
std::optional<uint64_t> parse_byte_size(const std::string& text);

// The entries of one architecture or one compiler.
struct CacheUsage {
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

struct CacheBreakdown {
  std::string dir;
  bool exists = false;
  // By arch ("sm_90a", "host", ...) and by compiler ("nvrtc 12.8", the host compiler's id);
  // entries whose key is not in the current form (Note [Kernel cache key]) count as "unknown".
  std::map<std::string, CacheUsage> by_arch, by_compiler, by_version;
};

// Reads each entry's stored key (the header only, not the binary).
Result<CacheBreakdown> cache_breakdown(const std::string& dir);

}  // namespace dg
