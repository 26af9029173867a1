// The kernel cache: a thread-safe memory cache in front of a content-addressed folder shared by
// every process (and by CI). Entry format: Note [Cache entry format] in cache_entry.h.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/memory_cache.h"
#include "runtime/status.h"

namespace dg {

// The cache folder: $DYNGEN_CACHE_DIR, else $XDG_CACHE_HOME/dyngen, else ~/.cache/dyngen (home
// from $HOME, else the password database). Empty when none can be found.
std::string default_cache_dir();

struct DiskCacheOptions {
  // The folder; empty means default_cache_dir(). Created (with parents) on the first put.
  std::string dir;
  // false: memory only, the folder is neither read nor written.
  bool use_disk = true;
  size_t memory_capacity_bytes = MemoryCache::kDefaultCapacityBytes;
  // Receives the one warning a cache gives when its folder cannot be written. Default: a line
  // on stderr.
  std::function<void(const std::string&)> warn;
  // Test-only fault injection (Note [Testing write failures as root]): called before each step of
  // writing an entry -- "mkdir", "open", "write", "close", "rename" -- a non-zero result fails
  // that step with that errno, as if the file system had returned it.
  std::function<int(std::string_view step)> fault_for_testing;
};

struct CacheCounters {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;           // get() found nothing usable (corrupt entries included)
  uint64_t corrupt_entries = 0;  // entries found on disk that failed verification
  uint64_t writes = 0;           // entries published to disk
  uint64_t write_failures = 0;   // failed attempts to publish (the first one degrades the cache)
};

class DiskCache {
 public:
  explicit DiskCache(DiskCacheOptions options = {});
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  // The payload stored under `key`: from memory, else from disk (verified, then kept in
  // memory). A missing, corrupt, truncated or foreign entry is a miss (std::nullopt).
  std::optional<std::string> get(std::string_view key);

  // Stores `payload` under `key` in memory and publishes it to disk atomically (Note [Atomic
  // publish]). A folder that cannot be written is not an error: the cache degrades to memory only
  // (Note [Degrading to memory]). Fails only for an empty key.
  Status put(std::string_view key, std::string_view payload);

  // Forgets `key` in memory, e.g. after the driver refused its binary (Note [Failed module load
  // is a miss] in cuda_driver.h). The disk entry is left for the next put to replace.
  void invalidate(std::string_view key);

  CacheCounters counters() const;
  const std::string& dir() const { return dir_; }
  // False when the cache is memory-only: by option, for lack of a folder, or after a failed write.
  bool disk_writable() const { return disk_writes_enabled_.load(); }

 private:
  bool write_entry(std::string_view key, std::string_view payload, std::string* error);
  void degrade(const std::string& error);
  int fault(std::string_view step) const;

  DiskCacheOptions options_;
  std::string dir_;
  bool read_disk_ = false;
  std::atomic<bool> disk_writes_enabled_{false};
  std::once_flag warned_;
  MemoryCache memory_;

  std::atomic<uint64_t> memory_hits_{0}, disk_hits_{0}, misses_{0}, corrupt_{0}, writes_{0},
      write_failures_{0};
};

}  // namespace dg
