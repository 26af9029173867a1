#include "frontends/cli/compile_flags.h"

#include <cerrno>
#include <cstdlib>

namespace dg {

CompileRequest CompileFlags::request() const {
  CompileRequest r;
  r.target = arch;
  r.cache_dir = cache_dir;
  r.emit_dir = emit_dir;
  r.disabled_passes = disabled_passes;
  return r;
}

std::optional<CompileOutcome> compile_or_report(const Graph& g, const CompileRequest& request,
                                                const std::string& file, std::ostream& err,
                                                int* exit_code) {
  CompileOutcome o = compile_graph(g, request);
  if (o.ok()) return o;
  err << "dyngen: " << file << ": " << o.error << "\n";
  *exit_code = o.status == DG_ERR_UNSUPPORTED ? 3 : o.status == DG_ERR_INVALID_INPUT ? 2 : 1;
  return std::nullopt;
}

namespace {
bool parse_int(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end) return false;
  *v = x;
  return true;
}
}  // namespace

bool parse_compile_flags(const std::vector<std::string>& args, const char* usage, bool allow_bind,
                         CompileFlags* f, std::ostream& err, bool allow_many) {
  auto bad = [&](const std::string& why) {
    err << "dyngen: " << why << "; usage: dyngen " << usage << "\n";
    return false;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= args.size()) return false;
      *dst = args[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help")
      f->help = true;
    else if (a == "--json")
      f->json = true;
    else if (a == "--arch" || a == "--target") {
      if (!value(&f->arch)) return bad(a + " needs a value");
      if (!allow_many && !f->archs.empty()) return bad("more than one " + a);
      f->archs.push_back(f->arch);
    } else if (a == "--cache-dir") {
      if (!value(&f->cache_dir)) return bad(a + " needs a value");
    } else if (a == "--emit") {
      if (!value(&f->emit_dir)) return bad(a + " needs a value");
    } else if (a == "--disable-pass") {
      if (!value(&v)) return bad(a + " needs a value");
      f->disabled_passes.insert(v);
    } else if (a == "--seed") {
      int64_t s;
      if (!value(&v) || !parse_int(v, &s)) return bad("--seed needs an integer");
      f->seed = static_cast<uint64_t>(s);
    } else if (allow_bind && a == "--bind") {
      int64_t n;
      size_t eq;
      if (!value(&v) || (eq = v.find('=')) == std::string::npos || !parse_int(v.substr(eq + 1), &n))
        return bad("--bind needs SYMBOL=INTEGER");
      f->bindings[v.substr(0, eq)] = n;
    } else if (!a.empty() && a[0] == '-') {
      return bad("unknown option " + a);
    } else if (f->files.empty() || allow_many) {
      if (f->files.empty()) f->file = a;
      f->files.push_back(a);
    } else {
      return bad("more than one FILE");
    }
  }
  if (!f->help && f->file.empty()) return bad("missing FILE");
  return true;
}

}  // namespace dg
