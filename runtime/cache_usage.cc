// cache_breakdown (declared in cache_prune.h): a cache folder's entries by architecture, compiler
// and dyngen version, from the stored keys (Note [Kernel cache key]).
#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>

#include "runtime/cache_entry.h"
#include "runtime/cache_files.h"
#include "runtime/cache_key.h"
#include "runtime/cache_prune.h"

namespace dg {
namespace {

// The stored key of the entry file at `path`, read from its header; "" when it is not readable
// as an entry (Note [Cache entry format]: magic, version, key length, key).
std::string stored_key(const std::string& path) {
  std::string head;
  if (read_file_prefix(path, 16, &head) != 0 || head.size() < 16) return "";
  if (head.compare(0, 8, std::string(kCacheMagic, 8)) != 0) return "";
  uint32_t key_len = 0;
  for (int i = 0; i < 4; ++i) key_len |= uint32_t(uint8_t(head[12 + i])) << (8 * i);
  if (key_len == 0 || key_len > kCacheMaxKeyBytes) return "";
  std::string bytes;
  if (read_file_prefix(path, 16 + key_len, &bytes) != 0 || bytes.size() < 16 + key_len) return "";
  return bytes.substr(16, key_len);
}

}  // namespace

Result<CacheBreakdown> cache_breakdown(const std::string& dir) {
  try {
    CacheBreakdown b;
    b.dir = dir;
    if (dir.empty()) return Status::error("no cache folder given");
    std::vector<DirEntry> listing;
    const int err = list_dir(dir, &listing);
    b.exists = err != ENOENT;
    if (err != 0 && err != ENOENT)
      return Status::error("cannot list cache folder '" + dir + "': " + std::strerror(err));
    for (const DirEntry& e : listing) {
      if (!e.regular || !is_entry_file_name(e.name)) continue;
      const std::string path = dir + "/" + e.name;
      FileId id;
      uint64_t size = 0;
      if (file_id(path, &id, &size) != 0) continue;  // removed meanwhile
      KernelKeyParts parts;
      if (!parse_kernel_cache_key(stored_key(path), &parts))
        parts.arch = parts.compiler = parts.version = "unknown";
      auto add = [&](std::map<std::string, CacheUsage>& m, const std::string& name) {
        CacheUsage& u = m[name];
        ++u.entries;
        u.bytes += size;
      };
      add(b.by_arch, parts.arch);
      add(b.by_compiler, parts.compiler);
      add(b.by_version, parts.version);
    }
    return b;
  } catch (const std::exception& e) {
    return Status::error(std::string("cache stats: ") + e.what());
  }
}

}  // namespace dg
