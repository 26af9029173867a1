#include "frontends/cli/commands.h"
#include "ir/graph_io.h"

namespace dg {

bool wants_help(const std::vector<std::string>& args) {
  return args.size() == 1 && (args[0] == "-h" || args[0] == "--help");
}

bool check_arity(const std::vector<std::string>& args, size_t n, std::string_view usage,
                 std::ostream& err) {
  bool ok = args.size() == n;
  for (const std::string& a : args) ok = ok && !a.empty() && a[0] != '-';
  if (!ok) err << "dyngen: usage: dyngen " << usage << "\n";
  return ok;
}

std::optional<Graph> load_or_report(const std::string& path, std::ostream& err) {
  LoadResult r = load_graph_file(path);
  if (!r.ok()) {
    err << "dyngen: " << r.error << "\n";
    return std::nullopt;
  }
  return std::move(r.graph);
}

}  // namespace dg
