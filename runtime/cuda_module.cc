// Loading and launching a module through the dlopen'd driver (CudaModule), and which archs a
// device runs (arch_runs_on, image_rejected); declared in runtime/cuda_driver.h beside the driver
// table they go through (runtime/cuda_driver.cc).
#include <exception>
#include <string>
#include <utility>

#include "runtime/cuda_driver.h"

namespace dg {
namespace {

constexpr unsigned kDefaultDynamicSmemLimit = 48 * 1024;

}  // namespace

// Note [Arch compatibility]
// Compute capabilities compare as numbers, never as strings. A cubin for sm_XY runs on devices of
// the same major version with minor >= Y; an arch-specific cubin (sm_90a, sm_100f) only on the
// exact capability (for "a") or the same major (for "f"); PTX (compute_XY) on any capability
// >= XY, JIT-compiled by the driver. So sm_90 code runs on an H200 (9.0), and sm_90a code too.
bool arch_runs_on(const std::string& arch, int device_cc) {
  std::string_view rest(arch);
  bool ptx = false;
  if (rest.substr(0, 3) == "sm_") {
    rest.remove_prefix(3);
  } else if (rest.substr(0, 8) == "compute_") {
    rest.remove_prefix(8);
    ptx = true;
  } else {
    return false;
  }
  int number = 0;
  size_t i = 0;
  for (; i < rest.size() && rest[i] >= '0' && rest[i] <= '9'; ++i)
    number = number * 10 + (rest[i] - '0');
  if (i == 0 || number < 10) return false;
  std::string_view suffix = rest.substr(i);
  if (suffix == "a") return device_cc == number;
  if (suffix == "f") return device_cc / 10 == number / 10 && device_cc >= number;
  if (!suffix.empty()) return false;
  if (ptx) return device_cc >= number;
  return device_cc / 10 == number / 10 && device_cc >= number;
}

bool image_rejected(cu::Result r) {
  return r == cu::kErrorInvalidImage || r == cu::kErrorNoBinaryForGpu ||
         r == cu::kErrorInvalidPtx || r == cu::kErrorUnsupportedPtxVersion;
}

CudaModule::CudaModule(CudaModule&& other) noexcept
    : driver_(other.driver_),
      module_(std::exchange(other.module_, nullptr)),
      context_(other.context_),
      jit_log_(std::move(other.jit_log_)) {}

CudaModule& CudaModule::operator=(CudaModule&& other) noexcept {
  if (this != &other) {
    if (module_ != nullptr && driver_ != nullptr) {
      ScopedContext scope(*driver_, context_);
      driver_->api().cuModuleUnload(module_);
    }
    driver_ = other.driver_;
    module_ = std::exchange(other.module_, nullptr);
    context_ = other.context_;
    jit_log_ = std::move(other.jit_log_);
  }
  return *this;
}

CudaModule::~CudaModule() {
  // Errors are ignored: at process exit the context may already be gone.
  if (module_ != nullptr && driver_ != nullptr) {
    ScopedContext scope(*driver_, context_);
    driver_->api().cuModuleUnload(module_);
  }
  module_ = nullptr;
}

Result<CudaModule> CudaModule::load(std::string_view image, int device, const CudaDriver& driver,
                                    cu::Result* code) {
  if (code) *code = cu::kSuccess;
  try {
    if (!driver.available()) return Status::error(driver.unavailable_reason());
    if (image.empty()) return Status::error("cannot load an empty module image");
    Result<cu::Context> ctx = driver.primary_context(device);
    if (!ctx.ok()) return ctx.status();
    ScopedContext scope(driver, ctx.value());
    if (!scope.status().ok()) return scope.status();
    // PTX must be NUL-terminated; a cubin carries its own size in the ELF header.
    std::string ptx;
    const void* data = image.data();
    if (image.substr(0, 4) != std::string_view("\x7f"
                                               "ELF",
                                               4) &&
        image.back() != '\0') {
      ptx.assign(image);
      data = ptx.c_str();
    }
    // The JIT's logs: the error log explains a refused PTX, the info log what the JIT did.
    std::string info_log(8192, '\0'), error_log(8192, '\0');
    int options[] = {cu::kJitInfoLogBuffer, cu::kJitInfoLogBufferSize, cu::kJitErrorLogBuffer,
                     cu::kJitErrorLogBufferSize};
    void* values[] = {info_log.data(), reinterpret_cast<void*>(info_log.size()), error_log.data(),
                      reinterpret_cast<void*>(error_log.size())};
    CudaModule m;
    m.driver_ = &driver;
    m.context_ = ctx.value();
    cu::Result r = driver.api().cuModuleLoadDataEx(&m.module_, data, 4, options, values);
    info_log.resize(info_log.find('\0') == std::string::npos ? info_log.size()
                                                             : info_log.find('\0'));
    error_log.resize(error_log.find('\0') == std::string::npos ? error_log.size()
                                                               : error_log.find('\0'));
    if (r != cu::kSuccess) {
      m.module_ = nullptr;
      if (code) *code = r;
      std::string msg = driver.error_text("cuModuleLoadDataEx", r);
      if (!error_log.empty()) msg += "\nJIT error log:\n" + error_log;
      return Status::error(msg);
    }
    m.jit_log_ = std::move(info_log);
    return m;
  } catch (const std::exception& e) {
    return Status::error(std::string("CudaModule::load: ") + e.what());
  }
}

Result<cu::Function> CudaModule::function(const std::string& name) const {
  if (module_ == nullptr) return Status::error("module not loaded");
  cu::Function f = nullptr;
  cu::Result r = driver_->api().cuModuleGetFunction(&f, module_, name.c_str());
  if (r != cu::kSuccess)
    return Status::error(driver_->error_text("cuModuleGetFunction " + name, r));
  return f;
}

Status CudaModule::launch(cu::Function function, LaunchDims grid, LaunchDims block,
                          unsigned shared_bytes, void* stream, void** args) const {
  if (module_ == nullptr || function == nullptr) return Status::error("launch: no function");
  const cu::DriverApi& api = driver_->api();
  // Note [Module per context]: a CUfunction belongs to its module's context, so that context is
  // current for the launch whatever thread (autograd's, say) launches.
  ScopedContext scope(*driver_, context_);
  if (!scope.status().ok()) return scope.status();
  if (shared_bytes > kDefaultDynamicSmemLimit) {
    cu::Result r = api.cuFuncSetAttribute(function, cu::kFuncAttrMaxDynamicSharedBytes,
                                          static_cast<int>(shared_bytes));
    if (r != cu::kSuccess) return Status::error(driver_->error_text("cuFuncSetAttribute", r));
  }
  cu::Result r = api.cuLaunchKernel(function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                    shared_bytes, static_cast<cu::Stream>(stream), args, nullptr);
  if (r != cu::kSuccess) return Status::error(driver_->error_text("cuLaunchKernel", r));
  return Status();
}

}  // namespace dg
