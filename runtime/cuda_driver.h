// The CUDA driver API, reached through dlopen("libcuda.so.1") and a table of function pointers,
// so the runtime loads, compiles and tests on machines without a GPU (style point 10). Only the
// few types and enum values we use are declared here; cuda.h is never included by this header.
#pragma once
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

constexpr Result kSuccess = 0;
constexpr Result kErrorStubLibrary = 34;
constexpr Result kErrorNoDevice = 100;
constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr int kFuncAttrMaxDynamicSharedBytes =
    8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

// One pointer per driver entry point we use; all set when CudaDriver::available().
struct DriverApi {
  Result (*cuInit)(unsigned flags) = nullptr;
  Result (*cuDeviceGetCount)(int* count) = nullptr;
  Result (*cuDeviceGet)(Device* device, int ordinal) = nullptr;
  Result (*cuDeviceGetAttribute)(int* value, int attribute, Device device) = nullptr;
  Result (*cuDevicePrimaryCtxRetain)(Context* context, Device device) = nullptr;
  Result (*cuCtxGetCurrent)(Context* context) = nullptr;
  Result (*cuCtxSetCurrent)(Context context) = nullptr;
  Result (*cuModuleLoadData)(Module* module, const void* image) = nullptr;
  Result (*cuModuleGetFunction)(Function* function, Module module, const char* name) = nullptr;
  Result (*cuModuleUnload)(Module module) = nullptr;
  Result (*cuLaunchKernel)(Function f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                           unsigned block_x, unsigned block_y, unsigned block_z,
                           unsigned shared_bytes, Stream stream, void** params,
                           void** extra) = nullptr;
  Result (*cuFuncSetAttribute)(Function f, int attribute, int value) = nullptr;
  Result (*cuGetErrorString)(Result error, const char** text) = nullptr;
};

}  // namespace cu

// The process-wide driver. Construction never fails: when libcuda or a device is missing the
// driver is simply unavailable and says why.
class CudaDriver {
 public:
  // Opens "libcuda.so.1" once per process (thread-safe).
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
  // Precondition: available().
  const cu::DriverApi& api() const { return api_; }

  // "sm_XY" of `device` ("sm_90a" for Hopper, whose kernels use wgmma); "sm_90a" when no
  // driver or device is there (the arch CI compiles for).
  std::string default_arch(int device = 0) const;
  // Compute capability as major*10+minor, or an error.
  Result<int> compute_capability(int device = 0) const;

  // Makes sure a context is current on this thread: keeps the caller's (torch's) if there is
  // one, else retains `device`'s primary context and makes it current. Returns that context.
  Result<cu::Context> ensure_context(int device = 0) const;

  // "CUDA_ERROR_...: text" for a driver result, prefixed by `what`.
  std::string error_text(std::string_view what, cu::Result r) const;

 private:
  CudaDriver() = default;
  void load(const std::string& library_path);

  void* handle_ = nullptr;
  bool available_ = false;
  std::string reason_;
  int device_count_ = 0;
  cu::DriverApi api_;
};

struct LaunchDims {
  unsigned x = 1, y = 1, z = 1;
};

// Note [Failed module load is a miss]
// A cached binary that the driver refuses (cuModuleLoadData fails: a cubin for another arch, a
// driver too old for the PTX, an entry damaged in a way its checksum missed) must not fail the
// user's call: the caller treats it exactly like a cache miss -- recompile from source for the
// device's arch, put() the new binary (which replaces the entry on disk), and load that. Only a
// second failure, on the freshly compiled binary, is reported. This is the "device kernel image
// is invalid" failure other caches turned into "delete your cache folder".

// A loaded module, unloaded on destruction. Move-only.
class CudaModule {
 public:
  CudaModule() = default;
  CudaModule(CudaModule&& other) noexcept;
  CudaModule& operator=(CudaModule&& other) noexcept;
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  ~CudaModule();

  // Loads a cubin or PTX image into the current context (see CudaDriver::ensure_context).
  // `driver` must outlive the module (CudaDriver::instance() always does).
  // A failure here is a cache miss for the caller: Note [Failed module load is a miss].
  static Result<CudaModule> load(std::string_view image, int device = 0,
                                 const CudaDriver& driver = CudaDriver::instance());

  bool loaded() const { return module_ != nullptr; }

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
};

}  // namespace dg
