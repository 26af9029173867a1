// `dyngen hash FILE`: prints the canonical graph hash (see Note [Canonical graph hash]).
#include "frontends/cli/commands.h"
#include "ir/graph_hash.h"

namespace dg {

int run_hash_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  constexpr std::string_view kUsage = "hash FILE";
  if (wants_help(args)) {
    out << "usage: dyngen " << kUsage << "\n"
        << "  Prints the SHA-256 of FILE's canonical form: the same for the text form and\n"
        << "  graph.fb of one graph, and for graphs that differ only in symbol names.\n";
    return kExitOk;
  }
  if (!check_arity(args, 1, kUsage, err)) return kExitInvalidInput;
  std::optional<Graph> g = load_or_report(args[0], err);
  if (!g) return kExitInvalidInput;
  out << graph_hash(*g) << "\n";
  return kExitOk;
}

}  // namespace dg
