// The flags `dyngen compile` and `dyngen run` share.
#pragma once
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/compiler.h"

namespace dg {

struct CompileFlags {
  std::string file;                       // the first FILE
  std::string arch;                       // the last --arch
  std::vector<std::string> files, archs;  // every FILE and --arch, in order (compile)
  std::string cache_dir, emit_dir;
  std::set<std::string> disabled_passes;
  std::map<std::string, int64_t> bindings;  // --bind SYMBOL=VALUE (run only)
  uint64_t seed = 1;
  bool json = false;
  bool help = false;
  CompileRequest request() const;
};

// Compiles the graph of `flags` for `request`; on failure prints the one-line error and sets
// *exit_code (3 unsupported, 2 invalid, 1 internal).
std::optional<CompileOutcome> compile_or_report(const Graph& g, const CompileRequest& request,
                                                const std::string& file, std::ostream& err,
                                                int* exit_code);

// Parses the words after the subcommand; prints a usage line and returns false on bad usage.
// `allow_many`: several FILEs and --arch values (compile); otherwise one of each.
bool parse_compile_flags(const std::vector<std::string>& args, const char* usage, bool allow_bind,
                         CompileFlags* flags, std::ostream& err, bool allow_many = false);

}  // namespace dg
