#include "tests/driver_double/double_test_util.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <regex>
#include <sstream>

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

std::string promoted_to_f32(const std::string& text) {
  return std::regex_replace(text, std::regex(R"(\bbf16\b)"), "f32");
}

std::vector<HostTensor> to_f32(const std::vector<HostTensor>& tensors) {
  std::vector<HostTensor> out;
  for (const HostTensor& t : tensors) {
    if (t.dtype != DType::kBF16) {
      out.push_back(t);
      continue;
    }
    HostTensor f = make_tensor(DType::kF32, t.shape);
    for (int64_t i = 0; i < t.numel(); ++i) f.set(i, t.get(i));  // exact
    out.push_back(std::move(f));
  }
  return out;
}

std::string bitwise_difference(const HostTensor& a, const HostTensor& b) {
  if (a.dtype != b.dtype || a.shape != b.shape)
    return a.to_string() + " differs from " + b.to_string();
  const size_t size = static_cast<size_t>(dtype_size(a.dtype));
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(&a.bytes[i * size], &b.bytes[i * size], size) != 0)
      return "element " + std::to_string(i) + ": " + std::to_string(a.get(i)) + " vs " +
             std::to_string(b.get(i));
  return "";
}

CompileRequest double_request(const std::string& target) {
  CompileRequest req;
  req.target = target;
  // The host module the double runs holds the source of the devices' arch (sm_90a).
  if (target == "host") req.source_arch = "sm_90a";
  req.cache_dir = DG_DOUBLE_CACHE_DIR;
  return req;
}

CompileOutcome compile_for_double(const Graph& g, const std::string& target) {
  CompileOutcome host = compile_graph(g, double_request("host"));
  EXPECT_TRUE(host.ok()) << host.error;
  return compile_graph(g, double_request(target));
}

HostAndGpu compile_host_and_gpu(const Graph& g) {
  HostAndGpu both{compile_graph(g, double_request("host")),
                  compile_graph(g, double_request("cuda"))};
  EXPECT_TRUE(both.host.ok()) << both.host.error;
  EXPECT_TRUE(both.gpu.ok()) << both.gpu.error;
  return both;
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
