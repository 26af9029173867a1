#include "tests/driver_double/double_test_util.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ir/text_format.h"

namespace dg::driver_double {

namespace {
// Runs before main, so before anything opens the driver: two simulated sm_90 devices, and
// DYNGEN_SYNC so a fault is reported under its kernel's name.
const bool kEnvironmentSet = [] {
  setenv("DYNGEN_CUDA_DRIVER", DG_DRIVER_DOUBLE, 1);
  setenv("DG_DOUBLE_DEVICES", "2", 1);
  setenv("DG_DOUBLE_CC", "90", 1);
  setenv("DYNGEN_SYNC", "1", 1);
  return true;
}();
}  // namespace

const Double& the_double() {
  static const Double d = [] {
    Double out;
    void* h = dlopen(DG_DRIVER_DOUBLE, RTLD_NOW | RTLD_LOCAL);
    if (!h) return out;
    out.calls = reinterpret_cast<const char* (*)()>(dlsym(h, "dgdbl_calls"));
    out.clear_calls = reinterpret_cast<void (*)()>(dlsym(h, "dgdbl_clear_calls"));
    out.set_execute = reinterpret_cast<void (*)(int)>(dlsym(h, "dgdbl_set_execute"));
    out.inject_fault = reinterpret_cast<void (*)(int, int)>(dlsym(h, "dgdbl_inject_fault"));
    out.clear_faults = reinterpret_cast<void (*)()>(dlsym(h, "dgdbl_clear_faults"));
    return out;
  }();
  EXPECT_TRUE(kEnvironmentSet && d.calls) << "cannot open " DG_DRIVER_DOUBLE;
  return d;
}

Graph parse(const std::string& text) {
  ParseResult r = parse_graph_text(text);
  EXPECT_TRUE(r.ok()) << r.error;
  return r.graph;
}

Graph load_fixture(const std::string& name) {
  std::ifstream f(std::string(DG_FIXTURES_DIR) + "/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse(ss.str());
}

CompileRequest double_request(const std::string& target) {
  CompileRequest req;
  req.target = target;
  req.cache_dir = DG_DOUBLE_CACHE_DIR;
  return req;
}

CompileOutcome compile_for_double(const Graph& g, const std::string& target) {
  CompileOutcome host = compile_graph(g, double_request("host"));
  EXPECT_TRUE(host.ok()) << host.error;
  return compile_graph(g, double_request(target));
}

std::string launch_calls(const std::string& calls) {
  std::istringstream in(calls);
  std::string line, out;
  while (std::getline(in, line))
    for (const char* prefix :
         {"cuModuleLoadDataEx", "cuModuleGetFunction", "cuLaunchKernel", "cuMemcpyHtoDAsync",
          "cuStreamSynchronize", "cuCtxSetCurrent", "  refused"})
      if (line.rfind(prefix, 0) == 0) out += line + "\n";
  return out;
}

}  // namespace dg::driver_double
