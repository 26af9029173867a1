// The CUDA driver API, reached through dlopen("libcuda.so.1") and a table of function pointers,
// so the runtime loads, compiles and tests on machines without a GPU (style point 10). Only the
// few types and enum values we use are declared here; cuda.h is never included by this header.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "runtime/status.h"

// Opaque driver handles, spelled as cuda.h spells them so the types agree if both are seen.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;

namespace dg {
namespace cu {

using Result = int;  // CUresult; 0 is CUDA_SUCCESS
using Device = int;  // CUdevice
using Context = CUctx_st*;
using Module = CUmod_st*;
using Function = CUfunc_st*;
using Stream = CUstream_st*;
using DevicePtr = unsigned long long;  // CUdeviceptr

constexpr Result kSuccess = 0;
constexpr Result kErrorStubLibrary = 34;
constexpr Result kErrorInvalidValue = 1;
constexpr Result kErrorNoDevice = 100;
constexpr Result kErrorInvalidImage = 200;
constexpr Result kErrorInvalidContext = 201;
constexpr Result kErrorNoBinaryForGpu = 209;
constexpr Result kErrorInvalidPtx = 218;
constexpr Result kErrorUnsupportedPtxVersion = 222;
constexpr Result kErrorNotFound = 500;
constexpr Result kErrorIllegalAddress = 700;
constexpr Result kErrorLaunchFailed = 719;
constexpr int kAttrMaxThreadsPerBlock = 1;       // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
constexpr int kAttrMaxGridDimX = 5;              // CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X (Y, Z follow)
constexpr int kAttrMaxSharedPerBlockOptin = 97;  // ..._MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
constexpr int kJitInfoLogBuffer = 3;             // CU_JIT_INFO_LOG_BUFFER
constexpr int kJitInfoLogBufferSize = 4;         // CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
constexpr int kJitErrorLogBuffer = 5;            // CU_JIT_ERROR_LOG_BUFFER
constexpr int kJitErrorLogBufferSize = 6;        // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr int kFuncAttrMaxDynamicSharedBytes =
    8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

// One pointer per driver entry point we use; all set when CudaDriver::available().
struct DriverApi {
  Result (*cuInit)(unsigned flags) = nullptr;
  Result (*cuDriverGetVersion)(int* version) = nullptr;
  Result (*cuDeviceGetCount)(int* count) = nullptr;
  Result (*cuDeviceGet)(Device* device, int ordinal) = nullptr;
  Result (*cuDeviceGetAttribute)(int* value, int attribute, Device device) = nullptr;
  Result (*cuDevicePrimaryCtxRetain)(Context* context, Device device) = nullptr;
  Result (*cuCtxGetCurrent)(Context* context) = nullptr;
  Result (*cuCtxSetCurrent)(Context context) = nullptr;
  Result (*cuModuleLoadDataEx)(Module* module, const void* image, unsigned num_options,
                               int* options, void** option_values) = nullptr;
  Result (*cuModuleGetFunction)(Function* function, Module module, const char* name) = nullptr;
  Result (*cuModuleUnload)(Module module) = nullptr;
  Result (*cuLaunchKernel)(Function f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                           unsigned block_x, unsigned block_y, unsigned block_z,
                           unsigned shared_bytes, Stream stream, void** params,
                           void** extra) = nullptr;
  Result (*cuFuncSetAttribute)(Function f, int attribute, int value) = nullptr;
  Result (*cuGetErrorString)(Result error, const char** text) = nullptr;
  Result (*cuGetErrorName)(Result error, const char** text) = nullptr;
  Result (*cuStreamSynchronize)(Stream stream) = nullptr;
  Result (*cuMemcpyHtoDAsync_v2)(DevicePtr dst, const void* src, size_t bytes,
                                 Stream stream) = nullptr;  // cuda.h's name for cuMemcpyHtoDAsync
  // Optional (null where the driver lacks it): TMA kernels need it, the rest do not. Arguments
  // as cuda.h declares them, enums as int.
  Result (*cuTensorMapEncodeTiled)(void* tensor_map, int data_type, unsigned rank, void* address,
                                   const unsigned long long* dims,
                                   const unsigned long long* strides, const unsigned* box,
                                   const unsigned* element_strides, int interleave, int swizzle,
                                   int l2_promotion, int oob_fill) = nullptr;
};

}  // namespace cu

// Hardware limits of one device, read once.
struct DeviceLimits {
  int max_threads_per_block = 1024;
  unsigned max_grid[3] = {0x7fffffffu, 65535u, 65535u};
  int max_shared_bytes_optin = 48 * 1024;
};

// The process-wide driver. Construction never fails: when libcuda or a device is missing the
// driver is simply unavailable and says why.
class CudaDriver {
 public:
  // Opens $DYNGEN_CUDA_DRIVER if set (the tests' driver double), else "libcuda.so.1"; once per
  // process (thread-safe).
  static CudaDriver& instance();
  // Opens a specific library; for tests (e.g. the toolkit's stub libcuda) and diagnostics.
  static CudaDriver open(const std::string& library_path);

  CudaDriver(CudaDriver&& other) noexcept;
  CudaDriver& operator=(CudaDriver&&) = delete;
  CudaDriver(const CudaDriver&) = delete;
  ~CudaDriver();

  bool available() const { return available_; }
  // Why the driver is unavailable ("libcuda.so.1: cannot open shared object file", "no CUDA
  // device", ...); empty when available.
  const std::string& unavailable_reason() const { return reason_; }
  int device_count() const { return device_count_; }
  // cuDriverGetVersion: 1000*major + 10*minor (12080 for 12.8); 0 when unavailable.
  int driver_version() const { return driver_version_; }
  // Precondition: available().
  const cu::DriverApi& api() const { return api_; }

  // "sm_XY" of `device` ("sm_90a" for Hopper, whose kernels use wgmma); "sm_90a" when no
  // driver or device is there (the arch CI compiles for).
  std::string default_arch(int device = 0) const;
  // Compute capability as major*10+minor, or an error.
  Result<int> compute_capability(int device = 0) const;
  Result<DeviceLimits> limits(int device) const;

  // `device`'s primary context, retained once for the life of the process (torch uses the same
  // one, so it is never released here).
  Result<cu::Context> primary_context(int device) const;
  // Makes sure a context is current on this thread: keeps the caller's (torch's) if there is
  // one, else makes `device`'s primary context current. Returns that context.
  Result<cu::Context> ensure_context(int device = 0) const;

  // "cuLaunchKernel failed: CUDA error 700 CUDA_ERROR_ILLEGAL_ADDRESS (text)".
  std::string error_text(std::string_view what, cu::Result r) const;

 private:
  CudaDriver() = default;
  void load(const std::string& library_path);

  void* handle_ = nullptr;
  bool available_ = false;
  std::string reason_;
  int device_count_ = 0;
  int driver_version_ = 0;
  cu::DriverApi api_;
  struct PerDevice;  // primary contexts and limits, filled on first use under a mutex
  std::unique_ptr<PerDevice> per_device_;
};

// Makes `context` current on this thread for the scope and restores the previous one after
// (Note [Module per context]).
class ScopedContext {
 public:
  ScopedContext(const CudaDriver& driver, cu::Context context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  const Status& status() const { return status_; }

 private:
  const CudaDriver& driver_;
  cu::Context previous_ = nullptr;
  bool restore_ = false;
  Status status_;
};

// A compute capability `arch` ("sm_90", "sm_90a", "compute_80") can run on a device of
// capability `device_cc` (major*10+minor): Note [Arch compatibility].
bool arch_runs_on(const std::string& arch, int device_cc);

// The driver refused the image itself (not the context or the device): the one case in which a
// cached binary is dropped (Note [Failed module load is a miss]).
bool image_rejected(cu::Result r);

struct LaunchDims {
  unsigned x = 1, y = 1, z = 1;
};

// Note [Failed module load is a miss]
// A cached binary that the driver refuses as an image (cuModuleLoadDataEx returns
// CUDA_ERROR_INVALID_IMAGE, NO_BINARY_FOR_GPU, INVALID_PTX or UNSUPPORTED_PTX_VERSION: a cubin for
// another arch, a driver too old for the PTX, an entry damaged in a way its checksum missed) must
// not fail the user's call: the caller treats it exactly like a cache miss -- recompile from
// source for the device's arch, put() the new binary (which replaces the entry on disk), and load
// that. Only a second failure, on the freshly compiled binary, is reported. Any other failure (a
// sticky fault from an earlier kernel, out of memory, no context) says nothing about the entry,
// which stays on disk; the error, with the driver's JIT log, goes to the caller.

// A loaded module, unloaded on destruction. Move-only.
class CudaModule {
 public:
  CudaModule() = default;
  CudaModule(CudaModule&& other) noexcept;
  CudaModule& operator=(CudaModule&& other) noexcept;
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  ~CudaModule();

  // Loads a cubin or PTX image into `device`'s primary context, keeping the driver's JIT logs
  // (the error log goes into the failure message). `driver` must outlive the module
  // (CudaDriver::instance() always does). `code` receives the driver's result, for
  // image_rejected(): Note [Failed module load is a miss].
  static Result<CudaModule> load(std::string_view image, int device = 0,
                                 const CudaDriver& driver = CudaDriver::instance(),
                                 cu::Result* code = nullptr);

  bool loaded() const { return module_ != nullptr; }
  cu::Context context() const { return context_; }
  // The driver's JIT info log of the load (empty for most cubins).
  const std::string& jit_log() const { return jit_log_; }

  // The kernel `name` (an extern "C" name, or a lowered C++ name).
  Result<cu::Function> function(const std::string& name) const;

  // Launches `function` on `stream` (the caller's CUstream, passed as void*; nullptr is the
  // legacy default stream). `args` is the usual array of pointers to each argument. Raises the
  // function's dynamic shared memory limit first when `shared_bytes` is above the 48 KiB default.
  Status launch(cu::Function function, LaunchDims grid, LaunchDims block, unsigned shared_bytes,
                void* stream, void** args) const;

 private:
  const CudaDriver* driver_ = nullptr;
  cu::Module module_ = nullptr;
  cu::Context context_ = nullptr;
  std::string jit_log_;
};

}  // namespace dg
