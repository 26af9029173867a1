// Running an executable on a real GPU: inputs copied to device memory, outputs copied back.
// Device memory comes from the driver itself (cuMemAlloc), reached through the same library the
// runtime opened, so the test needs nothing but the driver.
#pragma once
#include <vector>

#include "runtime/executable.h"
#include "runtime/reference/host_tensor.h"
#include "runtime/status.h"

namespace dg {

// Whether a GPU is usable here (else why not, in `reason`).
bool gpu_usable(std::string* reason);

// Device memory on device 0 for tests that launch kernels of their own (Note [GPU probes] in
// probe_test.cc), freed on destruction. Addresses are device pointers as integers.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena();
  Result<unsigned long long> alloc(size_t bytes);
  Result<unsigned long long> upload(const void* data, size_t bytes);  // alloc, then copy
  // Waits for the device, then copies `bytes` back.
  Status download(void* dst, unsigned long long src, size_t bytes) const;

 private:
  std::vector<unsigned long long> ptrs_;
};

// Runs `exe` (compiled for the GPU) on device 0 with `inputs`, returning the outputs on the host.
Result<std::vector<HostTensor>> run_on_device(const Executable& exe,
                                              const std::vector<HostTensor>& inputs);

}  // namespace dg
