#include "runtime/kernel_module.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "codegen/device/dg_tma_sm90.cuh"
#include "runtime/binary_key.h"
#include "runtime/cuda_driver.h"
#include "runtime/emu/emu_module.h"

namespace dg {

namespace {

constexpr int kBf16Bytes = 2;

class HostModule : public KernelModule {
 public:
  explicit HostModule(emu::EmuModule m) : module_(std::move(m)) {}
  Status resolve(const std::vector<std::string>& names) override {
    entries_.clear();
    for (const std::string& n : names) {
      DgEmuEntryFn fn = module_.find(n);
      if (!fn) return Status::error("host module has no kernel " + n);
      entries_.push_back(fn);
    }
    return {};
  }
  Status launch(size_t kernel, int, const std::array<uint32_t, 3>& grid,
                const std::array<int, 3>& block, int shared_bytes, void** args,
                void*) const override {
    DgEmuLaunch cfg{grid[0],
                    grid[1],
                    grid[2],
                    static_cast<unsigned>(block[0]),
                    static_cast<unsigned>(block[1]),
                    static_cast<unsigned>(block[2]),
                    static_cast<unsigned>(shared_bytes)};
    char err[512] = {0};
    if (entries_.at(kernel)(&cfg, args, err, sizeof(err)) != 0)
      return Status::error(std::string("kernel failed under host emulation: ") + err);
    return {};
  }
  Status copy_to_device(void* dst, const void* src, size_t bytes, int, void*) const override {
    std::memcpy(dst, src, bytes);
    return {};
  }
  bool on_gpu() const override { return false; }
  Status encode_tensor_map(TensorMapBytes* map, const void* address, uint64_t rows, uint64_t cols,
                           uint64_t row_stride_bytes, uint32_t box_rows,
                           uint32_t box_cols) const override {
    static_assert(sizeof(DgTensorMap) == sizeof(TensorMapBytes) &&
                  alignof(DgTensorMap) == alignof(TensorMapBytes));
    const dg_u64 dims[2] = {cols, rows};
    const dg_u32 box[2] = {box_cols, box_rows};
    const char* error = dg_tensor_map_encode(reinterpret_cast<DgTensorMap*>(map), kBf16Bytes,
                                             address, dims, row_stride_bytes, box, kDgSwizzle128B);
    if (error) return Status::error(error);
    return {};
  }

 private:
  emu::EmuModule module_;
  std::vector<DgEmuEntryFn> entries_;
};

// DYNGEN_SYNC=1: synchronize the stream after every launch and report a fault under the name of
// the kernel that caused it (read once per process). Device debug mode does too, so that a
// trap is reported under its kernel's name (Note [Device debug mode]).
bool sync_after_launch() {
  static const bool on = [] {
    const char* v = std::getenv("DYNGEN_SYNC");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on || device_debug_mode();
}

// Note [Module per context]
// A CUmodule and its CUfunctions belong to the context they were loaded in. One executable
// (keyed by graph and arch) serves every device its arch runs on: it keeps the image and loads it
// into each device's primary context on first use there (torch uses the primary contexts too), and
// every launch makes its module's context current. So autograd's thread, or a second GPU in the
// same process, never uses a function from another context.
class GpuModule : public KernelModule {
 public:
  explicit GpuModule(std::string image) : image_(std::move(image)) {}

  Status resolve(const std::vector<std::string>& names) override {
    std::lock_guard<std::mutex> lock(mu_);
    names_ = names;
    for (auto& [device, loaded] : by_device_) {
      Status s = loaded.resolve(names_);
      if (!s.ok()) return s;
    }
    return {};
  }

  Status load_into(int device, int* code) {
    std::lock_guard<std::mutex> lock(mu_);
    auto loaded = get(device, code);
    return loaded.ok() ? Status() : loaded.status();
  }

  Status launch(size_t kernel, int device, const std::array<uint32_t, 3>& grid,
                const std::array<int, 3>& block, int shared_bytes, void** args,
                void* stream) const override {
    const CudaDriver& driver = CudaDriver::instance();
    Result<DeviceLimits> limits = driver.limits(device);
    if (!limits.ok()) return limits.status();
    for (int d = 0; d < 3; ++d)
      if (grid[d] > limits->max_grid[d])
        return Status::error("grid dim " + std::to_string(d) + " = " + std::to_string(grid[d]) +
                             " is above the device's limit " + std::to_string(limits->max_grid[d]));
    if (block[0] * block[1] * block[2] > limits->max_threads_per_block)
      return Status::error("block of " + std::to_string(block[0] * block[1] * block[2]) +
                           " threads is above the device's limit");
    if (shared_bytes > limits->max_shared_bytes_optin)
      return Status::error(std::to_string(shared_bytes) + " bytes of shared memory is above the " +
                           "device's limit of " + std::to_string(limits->max_shared_bytes_optin));
    const Loaded* loaded = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto got = get(device, nullptr);
      if (!got.ok()) return got.status();
      loaded = got.value();
      // Note [One stream at a time]: the module's arrival counters are shared by its launches.
      auto last = last_stream_.find(device);
      if (last != last_stream_.end() && last->second != stream) {
        ScopedContext scope(driver, loaded->module.context());
        cu::Result r = driver.api().cuStreamSynchronize(static_cast<cu::Stream>(last->second));
        if (r != cu::kSuccess)
          return Status::error(driver.error_text(
              "waiting for the previous stream's launches of this module (Note [One stream at a "
              "time])",
              r));
      }
      last_stream_[device] = stream;
    }
    LaunchDims g{grid[0], grid[1], grid[2]};
    LaunchDims b{static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]),
                 static_cast<unsigned>(block[2])};
    Status s = loaded->module.launch(loaded->functions.at(kernel), g, b,
                                     static_cast<unsigned>(shared_bytes), stream, args);
    if (!s.ok() || !sync_after_launch()) return s;
    ScopedContext scope(driver, loaded->module.context());
    cu::Result r = driver.api().cuStreamSynchronize(static_cast<cu::Stream>(stream));
    if (r != cu::kSuccess)
      return Status::error(
          driver.error_text("DYNGEN_SYNC: cuStreamSynchronize after the launch", r) +
          (device_debug_mode() ? " (DYNGEN_DEVICE_DEBUG: a trap's message, which wait or check "
                                 "failed in which block and thread, is on the process's stdout)"
                               : ""));
    return {};
  }

  Status copy_to_device(void* dst, const void* src, size_t bytes, int device,
                        void* stream) const override {
    const CudaDriver& driver = CudaDriver::instance();
    Result<cu::Context> ctx = driver.primary_context(device);
    if (!ctx.ok()) return ctx.status();
    ScopedContext scope(driver, ctx.value());
    if (!scope.status().ok()) return scope.status();
    cu::Result r = driver.api().cuMemcpyHtoDAsync_v2(reinterpret_cast<cu::DevicePtr>(dst), src,
                                                     bytes, static_cast<cu::Stream>(stream));
    if (r != cu::kSuccess) return Status::error(driver.error_text("cuMemcpyHtoDAsync", r));
    return {};
  }

  bool on_gpu() const override { return true; }

  Status encode_tensor_map(TensorMapBytes* map, const void* address, uint64_t rows, uint64_t cols,
                           uint64_t row_stride_bytes, uint32_t box_rows,
                           uint32_t box_cols) const override {
    const CudaDriver& driver = CudaDriver::instance();
    auto encode = driver.api().cuTensorMapEncodeTiled;
    if (!encode)
      return Status::error("the CUDA driver lacks cuTensorMapEncodeTiled (it predates CUDA 12)");
    // cuda.h's CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, _SWIZZLE_128B and _L2_PROMOTION_L2_128B.
    constexpr int kBfloat16 = 9, kSwizzle128B = 3, kL2Promotion128B = 2;
    const unsigned long long dims[2] = {cols, rows}, strides[1] = {row_stride_bytes};
    const unsigned box[2] = {box_cols, box_rows}, element_strides[2] = {1, 1};
    cu::Result r = encode(map, kBfloat16, 2, const_cast<void*>(address), dims, strides, box,
                          element_strides, /*interleave=*/0, kSwizzle128B, kL2Promotion128B,
                          /*oob_fill=*/0);
    if (r == cu::kSuccess) return {};
    // The driver says only "invalid argument"; the rule it applied is the documented one.
    std::string why = driver.error_text("cuTensorMapEncodeTiled", r);
    const dg_u64 check_dims[2] = {cols, rows};
    const dg_u64 check_stride = row_stride_bytes;
    const dg_u32 check_box[2] = {box_cols, box_rows}, ones[2] = {1, 1};
    const char* rule = dg_tensor_map_check(2, kBf16Bytes, address, check_dims, &check_stride,
                                           check_box, ones, kDgSwizzle128B);
    if (rule && why.find(rule) == std::string::npos) why += ": " + std::string(rule);
    return Status::error(why);
  }

 private:
  struct Loaded {
    CudaModule module;
    std::vector<cu::Function> functions;
    Status resolve(const std::vector<std::string>& names) {
      functions.clear();
      for (const std::string& n : names) {
        auto f = module.function(n);
        if (!f.ok()) return f.status();
        functions.push_back(f.value());
      }
      return {};
    }
  };

  // The module in `device`'s context, loaded on first use. Caller holds mu_.
  Result<const Loaded*> get(int device, int* code) const {
    auto it = by_device_.find(device);
    if (it != by_device_.end()) return &it->second;
    cu::Result r = cu::kSuccess;
    auto m = CudaModule::load(image_, device, CudaDriver::instance(), &r);
    if (code) *code = r;
    if (!m.ok()) return Status::error("device " + std::to_string(device) + ": " + m.message());
    Loaded l{std::move(m).value(), {}};
    Status s = l.resolve(names_);
    if (!s.ok()) return s;
    return &by_device_.emplace(device, std::move(l)).first->second;
  }

  std::string image_;
  mutable std::mutex mu_;
  // Note [One stream at a time]
  // The split-K kernels count their blocks on arrival counters that are module state (Note
  // [Arrival counters] in codegen/emit_rank_gemm.cc), so two calls of one executable must not run
  // at once on two streams of a device. Calls on one stream are ordered; when a launch comes on
  // another stream than the module's last one on that device, the host first waits for that
  // stream to drain. Switching streams is rare (one stream per device is the common case), so
  // the wait costs nothing in the usual run; a stream under CUDA graph capture cannot be waited
  // for, and such a switch fails loudly rather than risk the counters.
  mutable std::map<int, void*> last_stream_;
  std::vector<std::string> names_;
  mutable std::map<int, Loaded> by_device_;
};

}  // namespace

Result<std::unique_ptr<KernelModule>> load_host_module(const std::string& so_bytes) {
  auto m = emu::EmuModule::load(so_bytes);
  if (!m.ok()) return m.status();
  return std::unique_ptr<KernelModule>(new HostModule(std::move(m).value()));
}

Result<std::unique_ptr<KernelModule>> load_cuda_module(const std::string& image, int device,
                                                       int* code) {
  if (code) *code = 0;
  auto m = std::make_unique<GpuModule>(image);
  Status s = m->load_into(device, code);
  if (!s.ok()) return s;
  return std::unique_ptr<KernelModule>(std::move(m));
}

}  // namespace dg
