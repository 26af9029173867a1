#include "runtime/cache_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>

namespace dg {

int make_dirs(const std::string& path) {
  try {
    if (path.empty()) return ENOENT;
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    // Create each missing component in turn; a racing process creating the same one is fine.
    for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
      const std::string prefix = path.substr(0, pos);
      if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
        const int err = errno;
        // EACCES/EROFS on an existing component (e.g. "/" or "/proc") is not an error.
        if (::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return err;
      }
      if (pos == std::string::npos) break;
    }
    if (::stat(path.c_str(), &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  } catch (const std::exception&) {
    return ENOMEM;
  }
}

int write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

int read_file_bytes(const std::string& path, std::string* out, FileId* id) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (!S_ISREG(st.st_mode)) {
    err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
  } else if (static_cast<uint64_t>(st.st_size) > kCacheMaxFileBytes) {
    err = EFBIG;
  }
  if (err == 0) {
    try {
      out->resize(static_cast<size_t>(st.st_size));
      size_t done = 0;
      while (done < out->size()) {
        const ssize_t n = ::read(fd, out->data() + done, out->size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          err = errno;
          break;
        }
        if (n == 0) break;  // shrank while we read: report what is there
        done += static_cast<size_t>(n);
      }
      out->resize(done);
    } catch (const std::exception&) {
      err = ENOMEM;
    }
    if (id != nullptr) *id = FileId{uint64_t(st.st_dev), uint64_t(st.st_ino), st.st_mtime};
  }
  ::close(fd);
  return err;
}

int read_file_prefix(const std::string& path, size_t max_bytes, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (!S_ISREG(st.st_mode)) {
    err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
  }
  if (err == 0) {
    try {
      out->resize(std::min<uint64_t>(max_bytes, static_cast<uint64_t>(st.st_size)));
      size_t done = 0;
      while (done < out->size()) {
        const ssize_t n = ::read(fd, out->data() + done, out->size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          err = errno;
          break;
        }
        if (n == 0) break;
        done += static_cast<size_t>(n);
      }
      out->resize(done);
    } catch (const std::exception&) {
      err = ENOMEM;
    }
  }
  ::close(fd);
  return err;
}

int file_id(const std::string& path, FileId* id, uint64_t* size) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno;
  *id = FileId{uint64_t(st.st_dev), uint64_t(st.st_ino), st.st_mtime};
  if (size != nullptr) *size = static_cast<uint64_t>(st.st_size);
  return 0;
}

int list_dir(const std::string& dir, std::vector<DirEntry>* out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return errno;
  int err = 0;
  try {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      const bool regular = ::lstat((dir + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode);
      out->push_back(DirEntry{name, regular});
    }
  } catch (const std::exception&) {
    err = ENOMEM;
  }
  ::closedir(d);
  return err;
}

}  // namespace dg
