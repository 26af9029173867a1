// NVRTC front door: compile one generated CUDA source, with in-memory headers, to a cubin for a
// named architecture (PTX when a cubin cannot be made). Works without a GPU: the architecture is
// always given explicitly, so CI compiles every generated source.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace dg {

// A header the source may #include by `name`, served from memory.
struct CudaHeader {
  std::string name;
  std::string content;
};

struct CompileOptions {
  // Target: "sm_80", "sm_90a", "sm_100f", ... for a cubin, or "compute_90" to ask for PTX.
  std::string arch = "sm_90a";
  bool fast_math = false;      // --use_fast_math
  bool line_info = false;      // -lineinfo
  bool ptxas_verbose = false;  // -Xptxas=-v: ptxas's per-kernel report in the log
  // Extra NVRTC options, passed verbatim after ours (e.g. "-DDG_TILE=128"). Part of the key.
  std::vector<std::string> extra_options;
};

enum class BinaryKind : uint8_t { kCubin = 0, kPtx = 1 };

struct CompiledKernel {
  BinaryKind kind = BinaryKind::kCubin;
  // Cubin (an ELF image) or PTX text (NUL-terminated, as cuModuleLoadData expects).
  std::string binary;
  // What was passed to -arch, e.g. "sm_90a", or "compute_121" after a PTX fallback.
  std::string target;
  // NVRTC's log; warnings may be present even on success.
  std::string log;
};

// Compiles `source`. On failure the Status message holds the NVRTC log. See
// Note [PTX fallback] in nvrtc_compiler.cc for when PTX comes back instead of a cubin.
Result<CompiledKernel> nvrtc_compile(std::string_view source,
                                     const std::vector<CudaHeader>& headers,
                                     const CompileOptions& options,
                                     std::string_view program_name = "dyngen_kernel.cu");

// "nvrtc-13.0". Part of every cache key (style point 8).
std::string nvrtc_version();

// The SM numbers this NVRTC can emit a cubin for, ascending (75, 80, 86, ..., 121).
std::vector<int> nvrtc_supported_archs();

// The NVRTC options nvrtc_compile passes for `options` (and the -arch it resolves to).
Result<std::vector<std::string>> nvrtc_options(const CompileOptions& options);

// Content key for the disk cache: a sha256 hex over everything that determines the binary --
// source, headers, resolved options, arch and NVRTC version. See Note [What the key covers].
// Empty only if memory ran out; do not cache under an empty key.
std::string compile_cache_key(std::string_view source, const std::vector<CudaHeader>& headers,
                              const CompileOptions& options);

// Kind of a stored binary, from its first bytes (ELF magic means cubin).
BinaryKind detect_binary_kind(std::string_view binary);

}  // namespace dg
