// The driver is opened with dlopen, never linked (Note [No link against libcuda] in
// runtime/CMakeLists.txt).
#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <utility>

#include "runtime/cache_key.h"

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
static_assert(dg::cu::kErrorInvalidValue == CUDA_ERROR_INVALID_VALUE);
static_assert(dg::cu::kErrorInvalidImage == CUDA_ERROR_INVALID_IMAGE);
static_assert(dg::cu::kErrorInvalidContext == CUDA_ERROR_INVALID_CONTEXT);
static_assert(dg::cu::kErrorNoBinaryForGpu == CUDA_ERROR_NO_BINARY_FOR_GPU);
static_assert(dg::cu::kErrorInvalidPtx == CUDA_ERROR_INVALID_PTX);
static_assert(dg::cu::kErrorUnsupportedPtxVersion == CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
static_assert(dg::cu::kErrorNotFound == CUDA_ERROR_NOT_FOUND);
static_assert(dg::cu::kErrorIllegalAddress == CUDA_ERROR_ILLEGAL_ADDRESS);
static_assert(dg::cu::kErrorLaunchFailed == CUDA_ERROR_LAUNCH_FAILED);
static_assert(dg::cu::kAttrMaxThreadsPerBlock == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
static_assert(dg::cu::kAttrMaxGridDimX == CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
static_assert(dg::cu::kAttrMaxGridDimX + 1 == CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
static_assert(dg::cu::kAttrMaxGridDimX + 2 == CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
static_assert(dg::cu::kAttrMaxSharedPerBlockOptin ==
              CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
static_assert(dg::cu::kJitInfoLogBuffer == CU_JIT_INFO_LOG_BUFFER);
static_assert(dg::cu::kJitInfoLogBufferSize == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
static_assert(dg::cu::kJitErrorLogBuffer == CU_JIT_ERROR_LOG_BUFFER);
static_assert(dg::cu::kJitErrorLogBufferSize == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
#endif

namespace dg {
namespace {

// Note [Driver symbol names]
// We look up the names cuda.h maps our calls to: unversioned ones (cuLaunchKernel, not
// cuLaunchKernel_ptsz), except cuMemcpyHtoDAsync, which cuda.h spells cuMemcpyHtoDAsync_v2 (the
// unversioned symbol takes a 32-bit device pointer). The caller always passes its stream
// explicitly, so the per-thread-default variant is not needed; a null stream means the legacy
// default stream.
template <typename Fn>
bool bind(void* handle, const char* name, Fn* slot, std::string* missing) {
  *slot = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*slot == nullptr && missing->empty()) *missing = name;
  return *slot != nullptr;
}

}  // namespace

struct CudaDriver::PerDevice {
  std::mutex mu;
  std::map<int, cu::Context> primary;
  std::map<int, DeviceLimits> limits;
};

CudaDriver& CudaDriver::instance() {
  // Never destroyed: modules may be unloaded from other static destructors.
  static CudaDriver* driver = [] {
    auto* d = new CudaDriver();
    const char* path = std::getenv("DYNGEN_CUDA_DRIVER");
    d->load(path && *path ? path : "libcuda.so.1");
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
      driver_version_(other.driver_version_),
      api_(other.api_),
      per_device_(std::move(other.per_device_)) {}

CudaDriver::~CudaDriver() {
  // Note: the handle is deliberately not dlclose'd; the driver owns threads and atexit hooks
  // that must outlive us, and unloading libcuda mid-process is not supported.
}

void CudaDriver::load(const std::string& library_path) {
  per_device_ = std::make_unique<PerDevice>();
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
    bind(handle_, "cuDriverGetVersion", &a.cuDriverGetVersion, &missing);
    bind(handle_, "cuDeviceGetCount", &a.cuDeviceGetCount, &missing);
    bind(handle_, "cuDeviceGet", &a.cuDeviceGet, &missing);
    bind(handle_, "cuDeviceGetAttribute", &a.cuDeviceGetAttribute, &missing);
    bind(handle_, "cuDevicePrimaryCtxRetain", &a.cuDevicePrimaryCtxRetain, &missing);
    bind(handle_, "cuCtxGetCurrent", &a.cuCtxGetCurrent, &missing);
    bind(handle_, "cuCtxSetCurrent", &a.cuCtxSetCurrent, &missing);
    bind(handle_, "cuModuleLoadDataEx", &a.cuModuleLoadDataEx, &missing);
    bind(handle_, "cuModuleGetFunction", &a.cuModuleGetFunction, &missing);
    bind(handle_, "cuModuleUnload", &a.cuModuleUnload, &missing);
    bind(handle_, "cuLaunchKernel", &a.cuLaunchKernel, &missing);
    bind(handle_, "cuFuncSetAttribute", &a.cuFuncSetAttribute, &missing);
    bind(handle_, "cuGetErrorString", &a.cuGetErrorString, &missing);
    bind(handle_, "cuGetErrorName", &a.cuGetErrorName, &missing);
    bind(handle_, "cuStreamSynchronize", &a.cuStreamSynchronize, &missing);
    bind(handle_, "cuMemcpyHtoDAsync_v2", &a.cuMemcpyHtoDAsync_v2, &missing);
    std::string optional;
    bind(handle_, "cuTensorMapEncodeTiled", &a.cuTensorMapEncodeTiled, &optional);
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
    if ((r = a.cuDriverGetVersion(&driver_version_)) != cu::kSuccess) {
      reason_ = error_text("cuDriverGetVersion", r);
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
  const char* name = nullptr;
  if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(r, &text) != cu::kSuccess ||
      text == nullptr) {
    text = "unknown error";
  }
  if (api_.cuGetErrorName == nullptr || api_.cuGetErrorName(r, &name) != cu::kSuccess ||
      name == nullptr) {
    name = "";
  }
  return std::string(what) + " failed: CUDA error " + std::to_string(r) + " " + name + " (" + text +
         ")";
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
  // Note [Kernel cache key]: the same mapping a CPU machine prebuilds with.
  return arch_for_compute_capability(cc.ok() ? cc.value() : 90);
}

Result<DeviceLimits> CudaDriver::limits(int device) const {
  if (!available_) return Status::error(reason_);
  std::lock_guard<std::mutex> lock(per_device_->mu);
  auto it = per_device_->limits.find(device);
  if (it != per_device_->limits.end()) return it->second;
  cu::Device dev = 0;
  cu::Result r = api_.cuDeviceGet(&dev, device);
  DeviceLimits l;
  int v = 0;
  if (r == cu::kSuccess &&
      (r = api_.cuDeviceGetAttribute(&v, cu::kAttrMaxThreadsPerBlock, dev)) == cu::kSuccess)
    l.max_threads_per_block = v;
  for (int d = 0; d < 3 && r == cu::kSuccess; ++d)
    if ((r = api_.cuDeviceGetAttribute(&v, cu::kAttrMaxGridDimX + d, dev)) == cu::kSuccess)
      l.max_grid[d] = static_cast<unsigned>(v);
  if (r == cu::kSuccess &&
      (r = api_.cuDeviceGetAttribute(&v, cu::kAttrMaxSharedPerBlockOptin, dev)) == cu::kSuccess)
    l.max_shared_bytes_optin = v;
  if (r != cu::kSuccess) return Status::error(error_text("device limits query", r));
  per_device_->limits[device] = l;
  return l;
}

Result<cu::Context> CudaDriver::primary_context(int device) const {
  if (!available_) return Status::error(reason_);
  if (device < 0 || device >= device_count_)
    return Status::error("no CUDA device " + std::to_string(device) + " (" +
                         std::to_string(device_count_) + " present)");
  std::lock_guard<std::mutex> lock(per_device_->mu);
  auto it = per_device_->primary.find(device);
  if (it != per_device_->primary.end()) return it->second;
  cu::Device dev = 0;
  cu::Context ctx = nullptr;
  cu::Result r = api_.cuDeviceGet(&dev, device);
  if (r != cu::kSuccess) return Status::error(error_text("cuDeviceGet", r));
  if ((r = api_.cuDevicePrimaryCtxRetain(&ctx, dev)) != cu::kSuccess)
    return Status::error(error_text("cuDevicePrimaryCtxRetain", r));
  per_device_->primary[device] = ctx;
  return ctx;
}

Result<cu::Context> CudaDriver::ensure_context(int device) const {
  if (!available_) return Status::error(reason_);
  cu::Context current = nullptr;
  cu::Result r = api_.cuCtxGetCurrent(&current);
  if (r != cu::kSuccess) return Status::error(error_text("cuCtxGetCurrent", r));
  if (current != nullptr) return current;
  Result<cu::Context> primary = primary_context(device);
  if (!primary.ok()) return primary;
  if ((r = api_.cuCtxSetCurrent(primary.value())) != cu::kSuccess)
    return Status::error(error_text("cuCtxSetCurrent", r));
  return primary;
}

ScopedContext::ScopedContext(const CudaDriver& driver, cu::Context context) : driver_(driver) {
  const cu::DriverApi& api = driver.api();
  cu::Result r = api.cuCtxGetCurrent(&previous_);
  if (r != cu::kSuccess) {
    status_ = Status::error(driver.error_text("cuCtxGetCurrent", r));
    return;
  }
  if (previous_ == context) return;
  if ((r = api.cuCtxSetCurrent(context)) != cu::kSuccess) {
    status_ = Status::error(driver.error_text("cuCtxSetCurrent", r));
    return;
  }
  restore_ = true;
}

ScopedContext::~ScopedContext() {
  if (restore_) driver_.api().cuCtxSetCurrent(previous_);
}

}  // namespace dg
