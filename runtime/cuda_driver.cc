#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <exception>
#include <utility>

#if __has_include(<cuda.h>)
#include <cuda.h>
// The values we declared ourselves must be the driver's.
static_assert(dg::cu::kSuccess == CUDA_SUCCESS);
static_assert(dg::cu::kErrorStubLibrary == CUDA_ERROR_STUB_LIBRARY);
static_assert(dg::cu::kErrorNoDevice == CUDA_ERROR_NO_DEVICE);
static_assert(dg::cu::kAttrComputeCapabilityMajor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(dg::cu::kAttrComputeCapabilityMinor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(dg::cu::kFuncAttrMaxDynamicSharedBytes ==
              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
#endif

namespace dg {
namespace {

constexpr unsigned kDefaultDynamicSmemLimit = 48 * 1024;

// Note [Driver symbol names]
// We look up the unversioned names (cuLaunchKernel, not cuLaunchKernel_ptsz). None of the entry
// points we use were renamed to _v2 in cuda.h, and the driver keeps exporting these names for
// binary compatibility. The caller always passes its stream explicitly, so the per-thread-default
// variant is not needed; a null stream means the legacy default stream.
template <typename Fn>
bool bind(void* handle, const char* name, Fn* slot, std::string* missing) {
  *slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*slot == nullptr && missing->empty()) *missing = name;
  return *slot != nullptr;
}

}  // namespace

CudaDriver& CudaDriver::instance() {
  // Never destroyed: modules may be unloaded from other static destructors.
  static CudaDriver* driver = [] {
    auto* d = new CudaDriver();
    d->load("libcuda.so.1");
    return d;
  }();
  return *driver;
}

CudaDriver CudaDriver::open(const std::string& library_path) {
  CudaDriver d;
  d.load(library_path);
  return d;
}

CudaDriver::CudaDriver(CudaDriver&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      available_(std::exchange(other.available_, false)),
      reason_(std::move(other.reason_)),
      device_count_(other.device_count_),
      api_(other.api_) {}

CudaDriver::~CudaDriver() {
  // Note: the handle is deliberately not dlclose'd; the driver owns threads and atexit hooks
  // that must outlive us, and unloading libcuda mid-process is not supported.
}

void CudaDriver::load(const std::string& library_path) {
  try {
    handle_ = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* e = dlerror();
      reason_ = "cannot load the CUDA driver: " + std::string(e ? e : library_path.c_str());
      return;
    }
    std::string missing;
    cu::DriverApi& a = api_;
    bind(handle_, "cuInit", &a.cuInit, &missing);
    bind(handle_, "cuDeviceGetCount", &a.cuDeviceGetCount, &missing);
    bind(handle_, "cuDeviceGet", &a.cuDeviceGet, &missing);
    bind(handle_, "cuDeviceGetAttribute", &a.cuDeviceGetAttribute, &missing);
    bind(handle_, "cuDevicePrimaryCtxRetain", &a.cuDevicePrimaryCtxRetain, &missing);
    bind(handle_, "cuCtxGetCurrent", &a.cuCtxGetCurrent, &missing);
    bind(handle_, "cuCtxSetCurrent", &a.cuCtxSetCurrent, &missing);
    bind(handle_, "cuModuleLoadData", &a.cuModuleLoadData, &missing);
    bind(handle_, "cuModuleGetFunction", &a.cuModuleGetFunction, &missing);
    bind(handle_, "cuModuleUnload", &a.cuModuleUnload, &missing);
    bind(handle_, "cuLaunchKernel", &a.cuLaunchKernel, &missing);
    bind(handle_, "cuFuncSetAttribute", &a.cuFuncSetAttribute, &missing);
    bind(handle_, "cuGetErrorString", &a.cuGetErrorString, &missing);
    if (!missing.empty()) {
      reason_ = library_path + " lacks " + missing + " (driver too old?)";
      return;
    }
    cu::Result r = a.cuInit(0);
    if (r != cu::kSuccess) {
      reason_ = error_text("cuInit", r);
      if (r == cu::kErrorStubLibrary) reason_ += " (this is the toolkit's stub libcuda)";
      return;
    }
    r = a.cuDeviceGetCount(&device_count_);
    if (r != cu::kSuccess) {
      reason_ = error_text("cuDeviceGetCount", r);
      return;
    }
    if (device_count_ <= 0) {
      reason_ = "no CUDA device";
      return;
    }
    available_ = true;
  } catch (const std::exception& e) {
    reason_ = std::string("loading the CUDA driver: ") + e.what();
  }
}

std::string CudaDriver::error_text(std::string_view what, cu::Result r) const {
  const char* text = nullptr;
  if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(r, &text) != cu::kSuccess ||
      text == nullptr) {
    text = "unknown error";
  }
  return std::string(what) + " failed: CUDA error " + std::to_string(r) + " (" + text + ")";
}

Result<int> CudaDriver::compute_capability(int device) const {
  if (!available_) return Status::error(reason_);
  if (device < 0 || device >= device_count_) {
    return Status::error("no CUDA device " + std::to_string(device));
  }
  cu::Device dev = 0;
  int major = 0, minor = 0;
  cu::Result r = api_.cuDeviceGet(&dev, device);
  if (r == cu::kSuccess)
    r = api_.cuDeviceGetAttribute(&major, cu::kAttrComputeCapabilityMajor, dev);
  if (r == cu::kSuccess)
    r = api_.cuDeviceGetAttribute(&minor, cu::kAttrComputeCapabilityMinor, dev);
  if (r != cu::kSuccess) return Status::error(error_text("compute capability query", r));
  return major * 10 + minor;
}

std::string CudaDriver::default_arch(int device) const {
  Result<int> cc = compute_capability(device);
  if (!cc.ok()) return "sm_90a";
  // Hopper's tensor-core (wgmma) and TMA instructions exist only in the "a" target.
  if (cc.value() == 90) return "sm_90a";
  return "sm_" + std::to_string(cc.value());
}

Result<cu::Context> CudaDriver::ensure_context(int device) const {
  if (!available_) return Status::error(reason_);
  cu::Context current = nullptr;
  cu::Result r = api_.cuCtxGetCurrent(&current);
  if (r != cu::kSuccess) return Status::error(error_text("cuCtxGetCurrent", r));
  if (current != nullptr) return current;
  cu::Device dev = 0;
  if ((r = api_.cuDeviceGet(&dev, device)) != cu::kSuccess)
    return Status::error(error_text("cuDeviceGet", r));
  // The primary context is retained for the life of the process and shared with the runtime API
  // (torch uses the same one), so it is never released here.
  if ((r = api_.cuDevicePrimaryCtxRetain(&current, dev)) != cu::kSuccess)
    return Status::error(error_text("cuDevicePrimaryCtxRetain", r));
  if ((r = api_.cuCtxSetCurrent(current)) != cu::kSuccess)
    return Status::error(error_text("cuCtxSetCurrent", r));
  return current;
}

CudaModule::CudaModule(CudaModule&& other) noexcept
    : driver_(other.driver_), module_(std::exchange(other.module_, nullptr)) {}

CudaModule& CudaModule::operator=(CudaModule&& other) noexcept {
  if (this != &other) {
    if (module_ != nullptr && driver_ != nullptr) driver_->api().cuModuleUnload(module_);
    driver_ = other.driver_;
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}

CudaModule::~CudaModule() {
  // Errors are ignored: at process exit the context may already be gone.
  if (module_ != nullptr && driver_ != nullptr) driver_->api().cuModuleUnload(module_);
  module_ = nullptr;
}

Result<CudaModule> CudaModule::load(std::string_view image, int device, const CudaDriver& driver) {
  try {
    if (!driver.available()) return Status::error(driver.unavailable_reason());
    if (image.empty()) return Status::error("cannot load an empty module image");
    Result<cu::Context> ctx = driver.ensure_context(device);
    if (!ctx.ok()) return ctx.status();
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
    CudaModule m;
    m.driver_ = &driver;
    cu::Result r = driver.api().cuModuleLoadData(&m.module_, data);
    if (r != cu::kSuccess) {
      m.module_ = nullptr;
      return Status::error(driver.error_text("cuModuleLoadData", r));
    }
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
