// A loaded set of kernels, on GPUs (cubin/PTX through the driver) or on the host (emulation):
// the executable launches through this one interface.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace dg {

// The bytes of one tensor map as a kernel receives them (CUtensorMap on a GPU, DgTensorMap under
// the host emulation): Note [Tensor maps] in codegen/kernel_plan.h.
struct alignas(64) TensorMapBytes {
  unsigned char bytes[128];
};

class KernelModule {
 public:
  virtual ~KernelModule() = default;
  // Looks up every kernel once; later launches refer to them by position.
  virtual Status resolve(const std::vector<std::string>& names) = 0;
  // Launches kernel `kernel` on `device` (a CUDA ordinal; ignored on the host).
  virtual Status launch(size_t kernel, int device, const std::array<uint32_t, 3>& grid,
                        const std::array<int, 3>& block, int shared_bytes, void** args,
                        void* stream) const = 0;
  // Copies `bytes` from host memory to `dst` on `device`, ordered on `stream` (a scalar passed
  // by value); the source may be reused as soon as this returns.
  virtual Status copy_to_device(void* dst, const void* src, size_t bytes, int device,
                                void* stream) const = 0;
  virtual bool on_gpu() const = 0;
  // Encodes `map` for a 2-D bf16 matrix at `address`: `rows` rows of `cols` elements,
  // `row_stride_bytes` apart, copied in boxes of box_rows x box_cols with a 128-byte swizzle. An
  // error (the driver's reason) when the matrix breaks a rule, e.g. an address off 16 bytes.
  virtual Status encode_tensor_map(TensorMapBytes* map, const void* address, uint64_t rows,
                                   uint64_t cols, uint64_t row_stride_bytes, uint32_t box_rows,
                                   uint32_t box_cols) const = 0;
};

// .so bytes from the host compiler (EmuModule).
Result<std::unique_ptr<KernelModule>> load_host_module(const std::string& so_bytes);

// A cubin or PTX image from NVRTC, loaded now into `device`'s primary context (so that a refused
// image shows at compile time, with the driver's result in `code`) and later into any other
// device's on first launch there: Note [Module per context].
Result<std::unique_ptr<KernelModule>> load_cuda_module(const std::string& image, int device,
                                                       int* code = nullptr);

}  // namespace dg
