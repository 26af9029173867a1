#include "frontends/cli/cache_command.h"

#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <string_view>

#include "runtime/cache_admin.h"
#include "runtime/cache_prune.h"
#include "runtime/disk_cache.h"
#include "runtime/json_text.h"

namespace dg {
namespace {

constexpr const char* kUsage =
    "usage: dyngen cache <stats|verify|clear|prune> [--cache-dir DIR] [--json] [--remove-corrupt]\n"
    "                    [--max-size SIZE] [--older-than DAYS]\n"
    "  stats    count entries and bytes in the kernel cache folder, in all and per\n"
    "           architecture, compiler and dyngen version\n"
    "  verify   check every entry's key and checksum; exit 4 if any is corrupt\n"
    "           (--remove-corrupt deletes them, and temporaries older than an hour)\n"
    "  clear    remove every entry (files dyngen did not write are kept)\n"
    "  prune    remove the least recently used entries until the rest fit in --max-size SIZE\n"
    "           (bytes, or 512M, 2G, ...), and entries unused for more than --older-than DAYS;\n"
    "           a cache hit counts as a use\n"
    "  --cache-dir DIR  the folder (default: $DYNGEN_CACHE_DIR, $XDG_CACHE_HOME/dyngen,\n"
    "                   ~/.cache/dyngen)\n"
    "  --json           machine-readable output\n";

struct Args {
  std::string command;
  std::string dir;
  bool json = false;
  bool remove_corrupt = false;
  bool help = false;
  CachePruneOptions prune;
};

// DAYS for --older-than: a non-negative decimal number of days (0.5 is twelve hours).
bool parse_days(const std::string& text, int64_t* seconds) {
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string::npos) return false;
  try {
    size_t used = 0;
    const double days = std::stod(text, &used);
    if (used != text.size() || days < 0 || days > 1e6) return false;
    *seconds = static_cast<int64_t>(days * 86400.0);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Parses `args`; returns an error message, or "" on success.
std::string parse(const std::vector<std::string>& args, Args* a) {
  size_t i = (!args.empty() && args[0] == "cache") ? 1 : 0;
  for (; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--json") {
      a->json = true;
    } else if (w == "--remove-corrupt") {
      a->remove_corrupt = true;
    } else if (w == "-h" || w == "--help") {
      a->help = true;
    } else if (w == "--max-size") {
      std::optional<uint64_t> bytes;
      if (i + 1 >= args.size() || !(bytes = parse_byte_size(args[i + 1])))
        return "--max-size needs a size (bytes, or with K, M, G, T)";
      a->prune.max_bytes = bytes;
      ++i;
    } else if (w == "--older-than") {
      int64_t seconds = 0;
      if (i + 1 >= args.size() || !parse_days(args[i + 1], &seconds))
        return "--older-than needs a number of days";
      a->prune.older_than_seconds = seconds;
      ++i;
    } else if (w == "--cache-dir") {
      if (i + 1 >= args.size() || args[i + 1].empty()) return "--cache-dir needs a folder";
      a->dir = args[++i];
    } else if (w.rfind("--cache-dir=", 0) == 0) {
      a->dir = w.substr(std::string_view("--cache-dir=").size());
      if (a->dir.empty()) return "--cache-dir needs a folder";
    } else if (!w.empty() && w[0] == '-') {
      return "unknown option '" + w + "'";
    } else if (a->command.empty()) {
      a->command = w;
    } else {
      return "unexpected argument '" + w + "'";
    }
  }
  if (a->help) return "";
  if (a->command.empty()) return "missing subcommand";
  if (a->command != "stats" && a->command != "verify" && a->command != "clear" &&
      a->command != "prune") {
    return "unknown subcommand '" + a->command + "'";
  }
  if (a->remove_corrupt && a->command != "verify") return "--remove-corrupt is for verify only";
  const bool bounds = a->prune.max_bytes || a->prune.older_than_seconds;
  if (bounds && a->command != "prune") return "--max-size and --older-than are for prune only";
  if (!bounds && a->command == "prune") return "prune needs --max-size SIZE or --older-than DAYS";
  return "";
}

int stats(const std::string& dir, bool json, std::ostream& out, std::ostream& err) {
  Result<CacheStats> r = cache_stats(dir);
  if (!r.ok()) {
    err << "dyngen cache stats: " << r.message() << "\n";
    return kCacheExitInternalError;
  }
  const CacheStats& s = r.value();
  Result<CacheBreakdown> b = cache_breakdown(dir);
  if (!b.ok()) {
    err << "dyngen cache stats: " << b.message() << "\n";
    return kCacheExitInternalError;
  }
  const std::pair<const char*, const std::map<std::string, CacheUsage>*> groups[] = {
      {"by_arch", &b->by_arch}, {"by_compiler", &b->by_compiler}, {"by_version", &b->by_version}};
  if (json) {
    Json j = {{"command", "stats"},          {"folder", s.dir},  {"exists", s.exists},
              {"entries", s.entries},        {"bytes", s.bytes}, {"temp_files", s.temp_files},
              {"other_files", s.other_files}};
    for (const auto& [name, map] : groups) {
      Json& group = j[name] = Json::object();
      for (const auto& [k, u] : *map) group[k] = {{"entries", u.entries}, {"bytes", u.bytes}};
    }
    out << json_text(j) << "\n";
  } else {
    out << "folder:      " << s.dir << (s.exists ? "" : " (does not exist)") << "\n"
        << "entries:     " << s.entries << "\n"
        << "bytes:       " << s.bytes << "\n"
        << "temp files:  " << s.temp_files << "\n"
        << "other files: " << s.other_files << "\n";
    for (const auto& [name, map] : groups) {
      if (map->empty()) continue;
      out << name << ":\n";
      for (const auto& [k, u] : *map)
        out << "  " << k << ": " << u.entries << " entries, " << u.bytes << " bytes\n";
    }
  }
  return kCacheExitOk;
}

int verify(const std::string& dir, bool json, bool remove, std::ostream& out, std::ostream& err) {
  Result<CacheVerifyReport> r = cache_verify(dir, remove);
  if (!r.ok()) {
    err << "dyngen cache verify: " << r.message() << "\n";
    return kCacheExitInternalError;
  }
  const CacheVerifyReport& v = r.value();
  if (json) {
    Json corrupt = Json::array();
    for (const CorruptEntry& c : v.corrupt_entries)
      corrupt.push_back({{"file", c.file}, {"reason", c.reason}});
    Json j = {{"command", "verify"},         {"folder", v.dir},
              {"exists", v.exists},          {"valid", v.valid},
              {"corrupt", v.corrupt},        {"removed", v.removed},
              {"temp_files", v.temp_files},  {"corrupt_entries", std::move(corrupt)},
              {"other_files", v.other_files}};
    out << json_text(j) << "\n";
  } else {
    out << "folder:      " << v.dir << (v.exists ? "" : " (does not exist)") << "\n"
        << "valid:       " << v.valid << "\n"
        << "corrupt:     " << v.corrupt << "\n";
    for (const CorruptEntry& c : v.corrupt_entries)
      out << "  " << c.file << ": " << c.reason << "\n";
    if (remove) out << "removed:     " << v.removed << "\n";
    out << "temp files:  " << v.temp_files << "\n"
        << "other files: " << v.other_files.size() << "\n";
    for (const std::string& f : v.other_files) out << "  " << f << "\n";
  }
  return v.corrupt > 0 ? kCacheExitCorrupt : kCacheExitOk;
}

int clear(const std::string& dir, bool json, std::ostream& out, std::ostream& err) {
  Result<CacheClearReport> r = cache_clear(dir);
  if (!r.ok()) {
    err << "dyngen cache clear: " << r.message() << "\n";
    return kCacheExitInternalError;
  }
  const CacheClearReport& c = r.value();
  if (json) {
    Json j = {{"command", "clear"},
              {"folder", c.dir},
              {"removed", c.removed},
              {"bytes", c.bytes},
              {"failed", c.failed}};
    out << json_text(j) << "\n";
  } else {
    out << "removed " << c.removed << " files (" << c.bytes << " bytes) from " << c.dir << "\n";
  }
  if (c.failed > 0) {
    err << "dyngen cache clear: " << c.failed << " files could not be removed\n";
    return kCacheExitInternalError;
  }
  return kCacheExitOk;
}

int prune(const std::string& dir, const CachePruneOptions& options, bool json, std::ostream& out,
          std::ostream& err) {
  Result<CachePruneReport> r = cache_prune(dir, options);
  if (!r.ok()) {
    err << "dyngen cache prune: " << r.message() << "\n";
    return kCacheExitInternalError;
  }
  const CachePruneReport& p = r.value();
  if (json) {
    Json j = {{"command", "prune"},
              {"folder", p.dir},
              {"exists", p.exists},
              {"kept", p.kept},
              {"kept_bytes", p.kept_bytes},
              {"removed", p.removed},
              {"removed_bytes", p.removed_bytes},
              {"failed", p.failed}};
    out << json_text(j) << "\n";
  } else {
    out << "kept " << p.kept << " entries (" << p.kept_bytes << " bytes), removed " << p.removed
        << " files (" << p.removed_bytes << " bytes) in " << p.dir << "\n";
  }
  if (p.failed > 0) {
    err << "dyngen cache prune: " << p.failed << " files could not be removed\n";
    return kCacheExitInternalError;
  }
  return kCacheExitOk;
}

}  // namespace

int run_cache_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    Args a;
    if (std::string problem = parse(args, &a); !problem.empty()) {
      err << "dyngen cache: " << problem << "\n" << kUsage;
      return kCacheExitUsage;
    }
    if (a.help) {
      out << kUsage;
      return kCacheExitOk;
    }
    const std::string dir = a.dir.empty() ? default_cache_dir() : a.dir;
    if (dir.empty()) {
      err << "dyngen cache: no cache folder (set DYNGEN_CACHE_DIR or HOME, or pass --cache-dir)\n";
      return kCacheExitInternalError;
    }
    if (a.command == "stats") return stats(dir, a.json, out, err);
    if (a.command == "verify") return verify(dir, a.json, a.remove_corrupt, out, err);
    if (a.command == "prune") return prune(dir, a.prune, a.json, out, err);
    return clear(dir, a.json, out, err);
  } catch (const std::exception& e) {
    err << "dyngen cache: internal error: " << e.what() << "\n";
    return kCacheExitInternalError;
  } catch (...) {
    err << "dyngen cache: internal error\n";
    return kCacheExitInternalError;
  }
}

}  // namespace dg
