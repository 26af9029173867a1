// Small POSIX file helpers shared by the disk cache and its management functions. Each returns 0
// or an errno value; none throws.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dg {

// Largest file read as a cache entry; anything bigger is not ours.
inline constexpr uint64_t kCacheMaxFileBytes = uint64_t{1} << 30;

// mkdir -p with mode 0755. EEXIST for an existing folder is success; ENOTDIR when a component
// is a regular file.
int make_dirs(const std::string& path);

// Writes all of `bytes` to `fd`, retrying short writes and EINTR.
int write_all(int fd, std::string_view bytes);

// Reads a whole regular file into *out. EISDIR/EINVAL for something that is not a regular file,
// EFBIG past kCacheMaxFileBytes. `inode` (optional) receives the file's device and inode number.
struct FileId {
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t mtime_s = 0;
};
int read_file_bytes(const std::string& path, std::string* out, FileId* id = nullptr);

// Reads at most `max_bytes` from the start of a regular file into *out (less if it is shorter).
int read_file_prefix(const std::string& path, size_t max_bytes, std::string* out);

// The identity of the file now at `path` (lstat).
int file_id(const std::string& path, FileId* id, uint64_t* size = nullptr);

struct DirEntry {
  std::string name;
  bool regular = false;
};
// Names in `dir` except "." and "..". ENOENT when the folder does not exist.
int list_dir(const std::string& dir, std::vector<DirEntry>* out);

}  // namespace dg
