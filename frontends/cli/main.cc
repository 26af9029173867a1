// `dyngen`: the command-line tool. Each subcommand is one row of kCommands and one file.
#include <csignal>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "frontends/cli/cache_command.h"
#include "frontends/cli/commands.h"
#include "ir/fb_loader.h"

#ifndef DG_VERSION
#define DG_VERSION "0.0.0"
#endif

namespace dg {
namespace {

struct Command {
  std::string_view name;
  std::string_view usage;  // the words after the name
  std::string_view summary;
  CommandFn run;
};

constexpr Command kCommands[] = {
    {"inspect", "FILE", "print a graph (graph.fb or text) in the IR text form",
     run_inspect_command},
    {"convert", "IN OUT", "convert between the text form and graph.fb (by extension)",
     run_convert_command},
    {"hash", "FILE", "print the canonical graph hash", run_hash_command},
    {"compile", "FILE [--arch A] [--json] ...", "compile (or find in the cache); print the kernels",
     run_compile_command},
    {"plan", "FILE --bind SYM=N [--gpu G] ...",
     "per kernel: CTAs, waves, roofline bound and achievable ESTIMATE", run_plan_command},
    {"run", "FILE --bind SYM=N ...", "run under host emulation and check against the reference",
     run_run_command},
    {"cache", "stats|verify|clear|prune [...]", "inspect, bound or clear the kernel cache",
     run_cache_command},
};

void print_help(std::ostream& out) {
  out << "usage: dyngen COMMAND [ARGS]\n"
         "       dyngen --help | --version\n\n"
         "commands:\n";
  for (const Command& c : kCommands) {
    std::string head = std::string(c.name) + " " + std::string(c.usage);
    out << "  " << head << std::string(head.size() < 32 ? 32 - head.size() : 1, ' ') << c.summary
        << "\n";
  }
  out << "\n`dyngen COMMAND --help` describes one command. A path ending in .fb is graph.fb;\n"
         "any other path is the IR text form.\n"
         "exit codes: 0 ok, 1 internal error, 2 invalid input, 3 unsupported graph,\n"
         "            4 run: results out of tolerance / cache verify: corrupt entries\n";
}

int dispatch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << "dyngen: missing command (see dyngen --help)\n";
    return kExitInvalidInput;
  }
  const std::string& name = args[0];
  if (name == "-h" || name == "--help" || name == "help") {
    print_help(out);
    return kExitOk;
  }
  if (name == "--version") {
    out << "dyngen " << DG_VERSION << " (graph.fb schema " << kGraphFbVersion << ")\n";
    return kExitOk;
  }
  for (const Command& c : kCommands)
    if (c.name == name)
      return c.run(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  err << "dyngen: unknown command '" << name << "' (see dyngen --help)\n";
  return kExitInvalidInput;
}

}  // namespace
}  // namespace dg

int main(int argc, char** argv) {
  // A closed stdout must be an error exit, not a SIGPIPE (see Note [dyngen exit codes]).
  std::signal(SIGPIPE, SIG_IGN);
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    int rc = dg::dispatch(args, std::cout, std::cerr);
    std::cout.flush();
    if (!std::cout) {
      std::cerr << "dyngen: cannot write to standard output\n";
      return dg::kExitInternalError;
    }
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "dyngen: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "dyngen: internal error\n";
  }
  return dg::kExitInternalError;
}
