// A loaded set of kernels, on a GPU (cubin/PTX through the driver) or on the host (emulation):
// the executable launches through this one interface.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace dg {

class KernelModule {
 public:
  virtual ~KernelModule() = default;
  // Looks up every kernel once; later launches refer to them by position.
  virtual Status resolve(const std::vector<std::string>& names) = 0;
  virtual Status launch(size_t kernel, const std::array<uint32_t, 3>& grid,
                        const std::array<int, 3>& block, int shared_bytes, void** args,
                        void* stream) const = 0;
  virtual bool on_gpu() const = 0;
};

// .so bytes from the host compiler (EmuModule) / a cubin or PTX image from NVRTC.
Result<std::unique_ptr<KernelModule>> load_host_module(const std::string& so_bytes);
Result<std::unique_ptr<KernelModule>> load_cuda_module(const std::string& image);

}  // namespace dg
