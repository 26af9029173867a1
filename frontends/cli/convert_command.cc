// `dyngen convert IN OUT`: text form <-> graph.fb, each side chosen by its extension (.fb).
#include "frontends/cli/commands.h"
#include "ir/graph_io.h"

namespace dg {

int run_convert_command(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err) {
  constexpr std::string_view kUsage = "convert IN OUT";
  if (wants_help(args)) {
    out << "usage: dyngen " << kUsage << "\n"
        << "  Loads and verifies IN and writes it to OUT. A path ending in .fb is graph.fb\n"
        << "  (FlatBuffers); any other path is the IR text form.\n";
    return kExitOk;
  }
  if (!check_arity(args, 2, kUsage, err)) return kExitInvalidInput;
  std::optional<Graph> g = load_or_report(args[0], err);
  if (!g) return kExitInvalidInput;
  if (std::string e = save_graph_file(args[1], *g); !e.empty()) {
    err << "dyngen: " << e << "\n";
    return kExitInvalidInput;
  }
  return kExitOk;
}

}  // namespace dg
