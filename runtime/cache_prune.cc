#include "runtime/cache_prune.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>
#include <vector>

#include "runtime/cache_admin.h"
#include "runtime/cache_entry.h"
#include "runtime/cache_files.h"

namespace dg {
namespace {

struct Candidate {
  std::string name;
  FileId id;
  uint64_t size = 0;
};

enum class Removal { kRemoved, kGone, kFailed };

// Unlinks `path` only if it is still the file that was scanned (Note [Pruning never leaves a
// partial entry]); kGone when it was removed or replaced meanwhile.
// Whole entries only (Note [Pruning never leaves a partial entry]).
Removal remove_scanned(const std::string& path, const FileId& scanned) {
  FileId now;
  if (file_id(path, &now) != 0) return Removal::kGone;
  if (now.device != scanned.device || now.inode != scanned.inode) return Removal::kGone;
  if (::unlink(path.c_str()) == 0) return Removal::kRemoved;
  return errno == ENOENT ? Removal::kGone : Removal::kFailed;
}

void count_removal(Removal how, uint64_t size, CachePruneReport* r) {
  if (how == Removal::kRemoved) {
    ++r->removed;
    r->removed_bytes += size;
  } else if (how == Removal::kFailed) {
    ++r->failed;
  }
}

}  // namespace

std::optional<uint64_t> parse_byte_size(const std::string& text) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  int shift = 0;
  if (unit.empty() || unit == "B")
    shift = 0;
  else if (unit == "K")
    shift = 10;
  else if (unit == "M")
    shift = 20;
  else if (unit == "G")
    shift = 30;
  else if (unit == "T")
    shift = 40;
  else
    return std::nullopt;
  if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

Result<CachePruneReport> cache_prune(const std::string& dir, const CachePruneOptions& options) {
  try {
    CachePruneReport r;
    r.dir = dir;
    if (dir.empty()) return Status::error("no cache folder given");
    std::vector<DirEntry> listing;
    const int err = list_dir(dir, &listing);
    r.exists = err != ENOENT;
    if (err != 0 && err != ENOENT)
      return Status::error("cannot list cache folder '" + dir + "': " + std::strerror(err));
    const int64_t now = options.now_s ? options.now_s : static_cast<int64_t>(std::time(nullptr));

    std::vector<Candidate> entries;
    for (const DirEntry& e : listing) {
      if (!e.regular) continue;
      Candidate c{e.name, {}, 0};
      if (file_id(dir + "/" + e.name, &c.id, &c.size) != 0) continue;  // removed meanwhile
      if (is_entry_file_name(e.name)) {
        entries.push_back(c);
      } else if (is_temp_file_name(e.name) && now - c.id.mtime_s > kStaleTempSeconds) {
        count_removal(remove_scanned(dir + "/" + e.name, c.id), c.size, &r);
      }
    }
    // Most recently used first; the name breaks ties so the choice is deterministic.
    std::sort(entries.begin(), entries.end(), [](const Candidate& a, const Candidate& b) {
      return a.id.mtime_s != b.id.mtime_s ? a.id.mtime_s > b.id.mtime_s : a.name < b.name;
    });
    // Keeps the longest most-recent-first run of entries that is young enough and fits.
    bool full = false;
    for (const Candidate& c : entries) {
      const bool too_old =
          options.older_than_seconds && now - c.id.mtime_s > *options.older_than_seconds;
      if (!full && !too_old && options.max_bytes && r.kept_bytes + c.size > *options.max_bytes)
        full = true;
      if (!full && !too_old) {
        ++r.kept;
        r.kept_bytes += c.size;
        continue;
      }
      count_removal(remove_scanned(dir + "/" + c.name, c.id), c.size, &r);
    }
    return r;
  } catch (const std::exception& e) {
    return Status::error(std::string("cache prune: ") + e.what());
  }
}

}  // namespace dg
