// What a compiled binary is keyed by (Note [Kernel cache key]): dyngen's version, the arch, the
// compiler with its resolved options, the headers the source includes, and the source.
#pragma once
#include <string>

#include "runtime/cache_key.h"
#include "runtime/compile_target.h"
#include "runtime/emu/emu_module.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/status.h"

namespace dg {

// DYNGEN_DEVICE_DEBUG=1: kernels compiled with DG_DEVICE_DEBUG, bounded waits and device checks
// that print and trap (Note [Device debug mode] in codegen/device/dg_debug.cuh). Read at every
// compile; any value but "" and "0" is on.
bool device_debug_mode();

// The NVRTC options of every device compile for `arch` (they enter the key), DG_DEVICE_DEBUG's
// macro among them in device debug mode.
CompileOptions device_compile_options(const std::string& arch);

// The host compiler's options for the emulation of a generated source (they enter the key).
emu::EmuCompileOptions host_compile_options();

// The key parts the compile path uses for CUDA `source` on `arch` ("host", an sm_XX arch or its
// compute_XX PTX); an error for an arch NVRTC's options cannot name.
Result<KernelKeyParts> kernel_key_parts(const std::string& source, const std::string& arch);

// The key of one compile's binary: `stored` is what the cache entry holds, `file` its file stem.
struct BinaryKey {
  std::string arch;  // "host", or what the device binary is built for (binary_arch)
  std::string source_sha;
  // What the binary names its source by (the PTX's .file, the host module's tag, which the driver
  // double matches): the sha, with "-debug" in device debug mode so that the two builds of one
  // source are told apart.
  std::string source_name;
  std::string stored;
  std::string file;  // CompileOutcome::key
};
Result<BinaryKey> binary_key(const std::string& source, const ResolvedTarget& target);

}  // namespace dg
