// `dyngen cache stats|verify|clear|prune [--cache-dir DIR] [--json] [--remove-corrupt] ...`.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace dg {

// Exit codes of `dyngen cache`.
inline constexpr int kCacheExitOk = 0;
inline constexpr int kCacheExitInternalError = 1;
inline constexpr int kCacheExitUsage = 2;
inline constexpr int kCacheExitCorrupt = 4;  // verify found corrupt entries

// Runs the `cache` subcommand. `args` are the words after "cache" (a leading "cache" is also
// accepted), e.g. {"verify", "--json"}. Reports go to `out`, errors and usage to `err`.
// The folder is --cache-dir, else default_cache_dir() ($DYNGEN_CACHE_DIR, ...).
// Returns 0 on success, 2 for bad usage, 1 for an internal error, and for verify 4 when corrupt
// entries were found (0 when all are valid). Never throws.
int run_cache_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace dg
