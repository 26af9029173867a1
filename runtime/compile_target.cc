#include "runtime/compile_target.h"

#include "runtime/cuda_driver.h"
#include "runtime/nvrtc_compiler.h"

namespace dg {

namespace {

// The first device at or after `preferred` (wrapping) whose capability runs `arch`, or -1.
int device_for(const CudaDriver& driver, const std::string& arch, int preferred) {
  int n = driver.device_count();
  for (int k = 0; k < n; ++k) {
    int d = (preferred + k) % n;
    Result<int> cc = driver.compute_capability(d);
    if (cc.ok() && arch_runs_on(arch, cc.value())) return d;
  }
  return -1;
}

// 1000*major + 10*minor of NVRTC ("nvrtc-13.0" -> 13000), 0 if it cannot be read.
int nvrtc_numeric_version() {
  static const int v = [] {
    std::string s = nvrtc_version();
    size_t dash = s.find('-'), dot = s.find('.');
    if (dash == std::string::npos || dot == std::string::npos) return 0;
    try {
      return std::stoi(s.substr(dash + 1, dot - dash - 1)) * 1000 +
             std::stoi(s.substr(dot + 1)) * 10;
    } catch (const std::exception&) {
      return 0;
    }
  }();
  return v;
}

}  // namespace

Result<ResolvedTarget> resolve_target(const std::string& requested) {
  CudaDriver& driver = CudaDriver::instance();
  if (requested == "host") return ResolvedTarget{"host", true};
  if (requested.empty()) {
    if (driver.available()) return ResolvedTarget{driver.default_arch(0), true};
    return ResolvedTarget{"host", true};
  }
  if (requested == "cuda" || requested.rfind("cuda:", 0) == 0) {
    int device = 0;
    if (requested.size() > 5) {
      std::string n = requested.substr(5);
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 6)
        return Status::error("target '" + requested + "': expected cuda:N with N a device number");
      device = std::stoi(n);
    }
    if (!driver.available())
      return Status::error("target " + requested + ": no usable GPU (" +
                           driver.unavailable_reason() + ")");
    if (device >= driver.device_count())
      return Status::error("target " + requested + ": there are " +
                           std::to_string(driver.device_count()) + " CUDA devices");
    return ResolvedTarget{driver.default_arch(device), true, device};
  }
  if (requested.rfind("sm_", 0) != 0)
    return Status::error("unknown target '" + requested +
                         "' (host, cuda, cuda:N, sm_80, sm_90a, ...)");
  // Note [Arch compatibility]: sm_90 code runs on an sm_90a device.
  int device = driver.available() ? device_for(driver, requested, 0) : -1;
  return ResolvedTarget{requested, device >= 0, device < 0 ? 0 : device};
}

// Note [PTX when the driver is older]
// A cubin from NVRTC X.Y needs a driver of at least X.Y; an older driver refuses it. Then the
// binary is PTX for the same arch ("compute_90a" for sm_90a), which the driver JIT-compiles, and
// the key says so, so that a newer driver on the same cache folder still gets its cubin.
std::string binary_arch(const ResolvedTarget& t) {
  const CudaDriver& driver = CudaDriver::instance();
  bool ptx = t.runnable && driver.available() && nvrtc_numeric_version() > 0 &&
             driver.driver_version() < nvrtc_numeric_version();
  return ptx ? "compute_" + t.name.substr(3) : t.name;
}

}  // namespace dg
