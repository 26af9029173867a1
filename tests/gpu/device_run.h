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

// Runs `exe` (compiled for the GPU) on device 0 with `inputs`, returning the outputs on the host.
Result<std::vector<HostTensor>> run_on_device(const Executable& exe,
                                              const std::vector<HostTensor>& inputs);

}  // namespace dg
