// What a compiled binary is keyed by (Note [Kernel cache key]): dyngen's version, the arch, the
// compiler with its resolved options, the headers the source includes, and the source.
#pragma once
#include <string>

#include "runtime/cache_key.h"
#include "runtime/compile_target.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/status.h"

namespace dg {

// The NVRTC options of every device compile for `arch` (they enter the key).
CompileOptions device_compile_options(const std::string& arch);

// The key parts the compile path uses for CUDA `source` on `arch` ("host", an sm_XX arch or its
// compute_XX PTX); an error for an arch NVRTC's options cannot name.
Result<KernelKeyParts> kernel_key_parts(const std::string& source, const std::string& arch);

// The key of one compile's binary: `stored` is what the cache entry holds, `file` its file stem.
struct BinaryKey {
  std::string arch;  // "host", or what the device binary is built for (binary_arch)
  std::string source_sha;
  std::string stored;
  std::string file;  // CompileOutcome::key
};
Result<BinaryKey> binary_key(const std::string& source, const ResolvedTarget& target);

}  // namespace dg
