#include "frontends/cli/cache_command.h"


#include <cstdio>
#include <exception>
#include <string_view>

#include "runtime/cache_admin.h"
#include "runtime/json_escape.h"
#include "runtime/disk_cache.h"

namespace dg {
namespace {

constexpr const char* kUsage =
    "usage: dyngen cache <stats|verify|clear> [--cache-dir DIR] [--json] [--remove-corrupt]\n"
    "  stats    count entries and bytes in the kernel cache folder\n"
    "  verify   check every entry's key and checksum; exit 4 if any is corrupt\n"
    "           (--remove-corrupt deletes them, and temporaries older than an hour)\n"
    "  clear    remove every entry (files dyngen did not write are kept)\n"
    "  --cache-dir DIR  the folder (default: $DYNGEN_CACHE_DIR, $XDG_CACHE_HOME/dyngen,\n"
    "                   ~/.cache/dyngen)\n"
    "  --json           machine-readable output\n";

struct Args {
  std::string command;
  std::string dir;
  bool json = false;
  bool remove_corrupt = false;
  bool help = false;
};

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
  if (a->command != "stats" && a->command != "verify" && a->command != "clear") {
    return "unknown subcommand '" + a->command + "'";
  }
  if (a->remove_corrupt && a->command != "verify") return "--remove-corrupt is for verify only";
  return "";
}


int stats(const std::string& dir, bool json, std::ostream& out, std::ostream& err) {
  Result<CacheStats> r = cache_stats(dir);
  if (!r.ok()) {
    err << "dyngen cache stats: " << r.message() << "\n";
    return kCacheExitInternalError;
  }
  const CacheStats& s = r.value();
  if (json) {
    out << "{\"command\":\"stats\",\"folder\":" << json_escape(s.dir)
        << ",\"exists\":" << (s.exists ? "true" : "false") << ",\"entries\":" << s.entries
        << ",\"bytes\":" << s.bytes << ",\"temp_files\":" << s.temp_files
        << ",\"other_files\":" << s.other_files << "}\n";
  } else {
    out << "folder:      " << s.dir << (s.exists ? "" : " (does not exist)") << "\n"
        << "entries:     " << s.entries << "\n"
        << "bytes:       " << s.bytes << "\n"
        << "temp files:  " << s.temp_files << "\n"
        << "other files: " << s.other_files << "\n";
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
    out << "{\"command\":\"verify\",\"folder\":" << json_escape(v.dir)
        << ",\"exists\":" << (v.exists ? "true" : "false") << ",\"valid\":" << v.valid
        << ",\"corrupt\":" << v.corrupt << ",\"removed\":" << v.removed
        << ",\"temp_files\":" << v.temp_files << ",\"corrupt_entries\":[";
    for (size_t i = 0; i < v.corrupt_entries.size(); ++i) {
      out << (i ? "," : "") << "{\"file\":" << json_escape(v.corrupt_entries[i].file)
          << ",\"reason\":" << json_escape(v.corrupt_entries[i].reason) << "}";
    }
    out << "],\"other_files\":[";
    for (size_t i = 0; i < v.other_files.size(); ++i) {
      out << (i ? "," : "") << json_escape(v.other_files[i]);
    }
    out << "]}\n";
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
    out << "{\"command\":\"clear\",\"folder\":" << json_escape(c.dir)
        << ",\"removed\":" << c.removed << ",\"bytes\":" << c.bytes << ",\"failed\":" << c.failed
        << "}\n";
  } else {
    out << "removed " << c.removed << " files (" << c.bytes << " bytes) from " << c.dir << "\n";
  }
  if (c.failed > 0) {
    err << "dyngen cache clear: " << c.failed << " files could not be removed\n";
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
