// The subcommands of `dyngen` (one file each) and what they share.
#pragma once
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace dg {

// Note [dyngen exit codes]
// 0 success; 1 internal error (a bug: an exception escaped, output could not be written);
// 2 invalid input (bad usage, a file that cannot be read, is malformed or fails verification),
// with exactly one line "dyngen: FILE: what is wrong" on stderr; 3 a valid graph that dyngen
// does not support (compile). No input ends the process with a signal.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternalError = 1;
inline constexpr int kExitInvalidInput = 2;
inline constexpr int kExitUnsupported = 3;

// A subcommand receives the words after its name.
using CommandFn = int (*)(const std::vector<std::string>& args, std::ostream& out,
                          std::ostream& err);

int run_inspect_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int run_convert_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int run_hash_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int run_compile_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int run_plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int run_run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Shared by the commands.
// True when args is {"-h"} or {"--help"}.
bool wants_help(const std::vector<std::string>& args);
// Checks the number of positional arguments; prints "dyngen: usage: dyngen USAGE" otherwise.
bool check_arity(const std::vector<std::string>& args, size_t n, std::string_view usage,
                 std::ostream& err);
// Loads a graph file; on failure prints its one-line error and returns nullopt.
std::optional<Graph> load_or_report(const std::string& path, std::ostream& err);

}  // namespace dg
