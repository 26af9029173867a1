#include "runtime/cached_binary.h"

#include "runtime/compiler.h"
#include "runtime/disk_cache.h"

namespace dg {

Result<CachedBinary> cached_device_binary(const std::string& source, const std::string& arch,
                                          const std::string& cache_dir) {
  DiskCacheOptions o;
  o.dir = cache_dir;
  DiskCache cache(o);
  // Note [Kernel cache key]: entries are looked up by the stored key text.
  auto parts = kernel_key_parts(source, arch);
  if (!parts.ok()) return Status::error(parts.message());
  std::optional<std::string> payload = cache.get(kernel_cache_key(parts.value()));
  if (!payload)
    return Status::error("the compiled binary is not in the cache folder " +
                         (cache_dir.empty() ? default_cache_dir() : cache_dir));
  CachedBinary b;
  if (!unpack_device_payload(*payload, &b.binary, &b.report))
    return Status::error("the cache entry is not a device binary with its ptxas report");
  return b;
}

Result<std::vector<CachedBinary>> cached_executable_binaries(const Executable& exe,
                                                             const std::string& arch,
                                                             const std::string& cache_dir) {
  std::vector<CachedBinary> out;
  for (const std::string* source : {&exe.plan().source, &exe.plan().fallback_source}) {
    if (source->empty()) continue;
    if (source == &exe.plan().fallback_source) {
      Status built = exe.build_fallbacks();
      if (!built.ok()) return built;
    }
    Result<CachedBinary> b = cached_device_binary(*source, arch, cache_dir);
    if (!b.ok()) return b.status();
    out.push_back(std::move(b).value());
  }
  return out;
}

}  // namespace dg
