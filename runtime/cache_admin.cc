#include "runtime/cache_admin.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>

#include "runtime/cache_entry.h"
#include "runtime/cache_files.h"

namespace dg {
namespace {

// Note [Only our files]
// The folder may be shared or mistyped (`--cache-dir ~`), so management never deletes a file it
// did not name: only "<64 hex>.dgk" entries and "<64 hex>.dgk.tmp.*" temporaries. Other files are
// reported and left alone, and so is the folder.

// Lists `dir`, sorted by name; a missing folder gives an empty list and *exists = false.
Status list_cache_dir(const std::string& dir, std::vector<DirEntry>* entries, bool* exists) {
  if (dir.empty()) return Status::error("no cache folder given");
  const int err = list_dir(dir, entries);
  *exists = err != ENOENT;
  if (err != 0 && err != ENOENT) {
    return Status::error("cannot list cache folder '" + dir + "': " + std::strerror(err));
  }
  std::sort(entries->begin(), entries->end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return Status();
}

// Note [Removing a corrupt entry safely]
// Between our read and the unlink another process may publish a good entry under the same name.
// We only unlink if the name still refers to the file we read (same device and inode), which
// narrows that window to a few instructions; losing the race costs one recompilation, not
// correctness.
// Note [Removing a corrupt entry safely].
bool remove_if_same(const std::string& path, const FileId& read_id) {
  FileId now;
  if (file_id(path, &now) != 0) return false;
  if (now.device != read_id.device || now.inode != read_id.inode) return false;
  return ::unlink(path.c_str()) == 0;
}

}  // namespace

Result<CacheStats> cache_stats(const std::string& dir) {
  try {
    CacheStats s;
    s.dir = dir;
    std::vector<DirEntry> entries;
    if (Status st = list_cache_dir(dir, &entries, &s.exists); !st.ok()) return st;
    for (const DirEntry& e : entries) {
      if (e.regular && is_entry_file_name(e.name)) {
        FileId id;
        uint64_t size = 0;
        if (file_id(dir + "/" + e.name, &id, &size) != 0) continue;  // removed meanwhile
        ++s.entries;
        s.bytes += size;
      } else if (e.regular && is_temp_file_name(e.name)) {
        ++s.temp_files;
      } else {
        ++s.other_files;
      }
    }
    return s;
  } catch (const std::exception& e) {
    return Status::error(std::string("cache stats: ") + e.what());
  }
}

Result<CacheVerifyReport> cache_verify(const std::string& dir, bool remove_corrupt) {
  try {
    CacheVerifyReport r;
    r.dir = dir;
    std::vector<DirEntry> entries;
    if (Status st = list_cache_dir(dir, &entries, &r.exists); !st.ok()) return st;
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    for (const DirEntry& e : entries) {
      const std::string path = dir + "/" + e.name;
      if (e.regular && is_temp_file_name(e.name)) {
        ++r.temp_files;
        FileId id;
        if (remove_corrupt && file_id(path, &id) == 0 && now - id.mtime_s > kStaleTempSeconds &&
            ::unlink(path.c_str()) == 0) {
          ++r.removed;
        }
        continue;
      }
      if (!e.regular || !is_entry_file_name(e.name)) {
        r.other_files.push_back(e.name);
        continue;
      }
      std::string bytes;
      FileId id;
      const int err = read_file_bytes(path, &bytes, &id);
      if (err == ENOENT) continue;  // removed or replaced meanwhile
      std::string reason;
      if (err != 0) {
        reason = std::string("read error: ") + std::strerror(err);
      } else {
        const DecodedEntry d = decode_cache_entry(bytes, nullptr);
        if (d.check != EntryCheck::kValid) {
          reason = entry_check_name(d.check);
        } else if (entry_file_name(d.key) != e.name) {
          reason = "stored key does not match the file name";
        }
      }
      if (reason.empty()) {
        ++r.valid;
        continue;
      }
      ++r.corrupt;
      r.corrupt_entries.push_back(CorruptEntry{e.name, reason});
      if (remove_corrupt && err == 0 && remove_if_same(path, id)) ++r.removed;
    }
    return r;
  } catch (const std::exception& e) {
    return Status::error(std::string("cache verify: ") + e.what());
  }
}

Result<CacheClearReport> cache_clear(const std::string& dir) {
  try {
    CacheClearReport r;
    r.dir = dir;
    std::vector<DirEntry> entries;
    bool exists = false;
    if (Status st = list_cache_dir(dir, &entries, &exists); !st.ok()) return st;
    for (const DirEntry& e : entries) {
      if (!e.regular || !(is_entry_file_name(e.name) || is_temp_file_name(e.name))) continue;
      const std::string path = dir + "/" + e.name;
      FileId id;
      uint64_t size = 0;
      if (file_id(path, &id, &size) != 0) continue;
      if (::unlink(path.c_str()) == 0) {
        ++r.removed;
        r.bytes += size;
      } else if (errno != ENOENT) {
        ++r.failed;
      }
    }
    return r;
  } catch (const std::exception& e) {
    return Status::error(std::string("cache clear: ") + e.what());
  }
}

}  // namespace dg
