// `dyngen inspect FILE`: prints the graph in the IR text form.
#include "frontends/cli/commands.h"
#include "ir/text_format.h"

namespace dg {

int run_inspect_command(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err) {
  constexpr std::string_view kUsage = "inspect FILE";
  if (wants_help(args)) {
    out << "usage: dyngen " << kUsage << "\n"
        << "  Loads and verifies FILE (graph.fb if it ends in .fb, else the text form) and\n"
        << "  prints it in the IR text form.\n";
    return kExitOk;
  }
  if (!check_arity(args, 1, kUsage, err)) return kExitInvalidInput;
  std::optional<Graph> g = load_or_report(args[0], err);
  if (!g) return kExitInvalidInput;
  out << print_graph(*g);
  return kExitOk;
}

}  // namespace dg
