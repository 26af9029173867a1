#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>

#include "runtime/cache_entry.h"
#include "runtime/cache_files.h"

namespace dg {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

// A name no other writer uses: the pid separates processes on one host, the counter threads in
// one process, and the random part hosts sharing a network folder. O_EXCL backs it up.
std::string temp_name(const std::string& final_name) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (uint64_t(getpid()) << 32)};
  char suffix[80];
  std::snprintf(suffix, sizeof suffix, "%d.%llu.%016llx", static_cast<int>(getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)),
                static_cast<unsigned long long>(rng()));
  return final_name + ".tmp." + suffix;
}

}  // namespace

std::string default_cache_dir() {
  try {
    if (std::string d = env("DYNGEN_CACHE_DIR"); !d.empty()) return d;
    if (std::string x = env("XDG_CACHE_HOME"); !x.empty() && x[0] == '/') return x + "/dyngen";
    std::string home = env("HOME");
    if (home.empty()) {
      if (const passwd* pw = getpwuid(getuid()); pw != nullptr && pw->pw_dir != nullptr) {
        home = pw->pw_dir;
      }
    }
    return home.empty() ? std::string() : home + "/.cache/dyngen";
  } catch (const std::exception&) {
    return std::string();
  }
}

DiskCache::DiskCache(DiskCacheOptions options)
    : options_(std::move(options)), memory_(options_.memory_capacity_bytes) {
  if (!options_.use_disk) return;
  dir_ = options_.dir.empty() ? default_cache_dir() : options_.dir;
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (dir_.empty()) {
    degrade("no cache folder: set DYNGEN_CACHE_DIR or HOME");
    return;
  }
  read_disk_ = true;
  disk_writes_enabled_ = true;
}

std::optional<std::string> DiskCache::get(std::string_view key) {
  try {
    if (std::optional<std::string> hit = memory_.get(key)) {
      ++memory_hits_;
      return hit;
    }
    if (read_disk_ && !key.empty()) {
      std::string bytes;
      const std::string path = dir_ + "/" + entry_file_name(key);
      if (read_file_bytes(path, &bytes) == 0) {
        const DecodedEntry d = decode_cache_entry(bytes, &key);
        if (d.check == EntryCheck::kValid) {
          ++disk_hits_;
          // Note [A hit refreshes an entry]
          // `dyngen cache prune` removes the least recently used entries first and judges use by
          // the modification time, which every disk hit sets to now (the access time is not
          // reliable: noatime and relatime mounts). The contents are not touched. A folder we
          // cannot write (read-only CI cache) keeps its times; that is not an error.
          (void)::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
          std::string payload(d.payload);
          memory_.put(key, payload);
          return payload;
        }
        // Note [Corrupt entries are not deleted on read]
        // Another process may publish a good entry between our read and an unlink, and we would
        // delete it. The next put() replaces the bad file atomically instead; `dyngen cache
        // verify --remove-corrupt` cleans up entries nobody puts again.
        ++corrupt_;
      }
    }
  } catch (const std::exception&) {
    // fall through: a miss
  }
  ++misses_;
  return std::nullopt;
}

Status DiskCache::put(std::string_view key, std::string_view payload) {
  if (key.empty()) return Status::error("kernel cache: empty key");
  try {
    memory_.put(key, payload);
    if (!disk_writes_enabled_.load()) return Status();
    std::string error;
    if (write_entry(key, payload, &error)) {
      ++writes_;
    } else {
      ++write_failures_;
      degrade(error);
    }
  } catch (const std::exception& e) {
    ++write_failures_;
    degrade(std::string("kernel cache: ") + e.what());
  }
  return Status();
}

void DiskCache::invalidate(std::string_view key) { memory_.erase(key); }

CacheCounters DiskCache::counters() const {
  CacheCounters c;
  c.memory_hits = memory_hits_.load();
  c.disk_hits = disk_hits_.load();
  c.misses = misses_.load();
  c.corrupt_entries = corrupt_.load();
  c.writes = writes_.load();
  c.write_failures = write_failures_.load();
  return c;
}

int DiskCache::fault(std::string_view step) const {
  return options_.fault_for_testing ? options_.fault_for_testing(step) : 0;
}

// Note [Atomic publish]
// An entry is written in full to a temporary file in the cache folder itself (same file system),
// then rename()d over the final name. rename is atomic: readers see the old file or the new one,
// never a partial one, and when many processes put the same key each rename simply replaces the
// previous complete file -- all succeed and one valid entry remains. We do not fsync: a crash can
// leave a torn file after rename on some file systems, and the checksum turns that into a miss.
// ENOENT at open/rename means someone removed the folder under us (`dyngen cache clear`), so
// the folder is re-created and the write tried once more before giving up.
bool DiskCache::write_entry(std::string_view key, std::string_view payload, std::string* error) {
  const std::string name = entry_file_name(key);
  const std::string final_path = dir_ + "/" + name;
  const std::string bytes = encode_cache_entry(key, payload);
  auto fail = [&](const char* step, int err, const std::string& path) {
    *error = std::string(step) + " " + path + ": " + std::strerror(err);
    return false;
  };
  for (int attempt = 0;; ++attempt) {
    int err = fault("mkdir");
    if (err == 0) err = make_dirs(dir_);
    if (err != 0) return fail("mkdir", err, dir_);

    const std::string tmp_path = dir_ + "/" + temp_name(name);
    int fd = -1;
    if ((err = fault("open")) == 0) {
      fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) err = errno;
    }
    if (err == ENOENT && attempt == 0) continue;
    if (err != 0) return fail("open", err, tmp_path);

    if ((err = fault("write")) == 0) err = write_all(fd, bytes);
    const int close_err = ::close(fd) != 0 ? errno : fault("close");
    if (err == 0 && close_err != 0) err = close_err;  // NFS reports ENOSPC/EDQUOT at close
    if (err != 0) {
      ::unlink(tmp_path.c_str());
      return fail("write", err, tmp_path);
    }

    // Published by rename (Note [Atomic publish]).
    if ((err = fault("rename")) == 0 && ::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
      err = errno;
    }
    if (err != 0) {
      ::unlink(tmp_path.c_str());
      if (err == ENOENT && attempt == 0) continue;
      return fail("rename", err, final_path);
    }
    return true;
  }
}

// Note [Degrading to memory]
// A folder that cannot be written (EROFS, EACCES, ENOSPC, EDQUOT, a path through a regular file,
// ...) must not fail compilation. The first failed write switches this cache to memory-only
// writes and emits exactly one warning; later puts do not touch the disk, so there is neither a
// warning nor a syscall per call. Reads from the folder continue: a read-only folder that CI
// filled earlier is still a valid source of hits.
void DiskCache::degrade(const std::string& error) {
  disk_writes_enabled_ = false;
  std::call_once(warned_, [&] {
    const std::string message = "dyngen: warning: kernel cache folder " +
                                (dir_.empty() ? std::string("unavailable") : "'" + dir_ + "'") +
                                " is not writable (" + error +
                                "); caching compiled kernels in memory only";
    try {
      if (options_.warn) {
        options_.warn(message);
        return;
      }
    } catch (...) {
      // a throwing sink falls back to stderr
    }
    std::fprintf(stderr, "%s\n", message.c_str());
  });
}

}  // namespace dg
