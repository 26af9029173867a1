// The kernel-cache key: what a compiled binary depends on, written out so that a cache folder can
// be read (stats per architecture and compiler) and so that any machine computes the same key.
#pragma once
#include <string>
#include <string_view>

namespace dg {

// Note [Kernel cache key]
// A binary depends on dyngen's version, the target architecture, the compiler (NVRTC's version,
// or the host compiler's identity for the CPU emulation), the device headers and the generated
// source; nothing else. In particular not on the machine: a CPU machine compiling for "sm_90a"
// writes the very entry an H100/H200 process looks up, because a device of compute capability
// 9.0 resolves to "sm_90a" (arch_for_compute_capability). The stored key is the text
//
//   dyngen-kernel-cache-v2
//   dyngen <version>
//   arch <arch>
//   compiler <compiler id>
//   headers <sha256 hex of the device headers>
//   source <sha256 hex of the CUDA source>
//
// and the entry's file name is sha256_hex(that text) + ".dgk" (cache_entry.h); that hex string is
// also the key dyngen reports (dg_executable_info, `dyngen compile`).
struct KernelKeyParts {
  std::string version;   // dyngen_version()
  std::string arch;      // "host", "sm_80", "sm_90a", ...
  std::string compiler;  // "nvrtc 12.8", or the host compiler's identity
  std::string headers_digest;
  std::string source_digest;
};

// The stored key text of Note [Kernel cache key].
std::string kernel_cache_key(const KernelKeyParts& parts);

// The parts back from a stored key; false for a key in another form (an older format, a key a
// test wrote), which stats report as "unknown".
bool parse_kernel_cache_key(std::string_view key, KernelKeyParts* parts);

// The arch dyngen compiles for on a device of compute capability `cc` (major * 10 + minor):
// "sm_90a" for 9.0, whose tensor-core (wgmma) and TMA instructions exist only in the "a"
// target, else "sm_<cc>".
std::string arch_for_compute_capability(int cc);

}  // namespace dg
