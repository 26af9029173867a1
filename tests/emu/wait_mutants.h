// The sm_90a main loop (codegen/device/dg_gemm_sm90.cuh) with a wrong mbarrier parity, for the
// device debug tests (Note [Device debug mode] in codegen/device/dg_debug.cuh) under the emulation
// and through the driver double: the producer waits for phase `round` of a stage's `empty`
// barrier instead of the phase before it, so its first wait needs the consumers to free a stage
// they never got: on a GPU, a silent hang.
#pragma once
#include <string>

#include "runtime/emu/device_headers.h"
#include "tests/emu/wgmma_gemm_kernels.h"

namespace dg::emu::testing {

inline constexpr const char* kRightProducerParity = "&empty[s], (round & 1u) ^ 1u";
inline constexpr const char* kWrongProducerParity = "&empty[s], round & 1u";

// The 128 x 64 tile with three stages of kWgmmaGemmKernels: its barriers follow the stages.
inline constexpr unsigned kGemmStageBytes = 128 * 64 * 2 + 64 * 64 * 2;
inline constexpr unsigned kFullBarrierAddress = 3 * kGemmStageBytes;           // full[0]
inline constexpr unsigned kEmptyBarrierAddress = kFullBarrierAddress + 3 * 8;  // empty[0]

// kWgmmaGemmKernels over dg_gemm_sm90.cuh with the producer's parity replaced by `parity`
// (kRightProducerParity gives the loop as it is); "" when the anchor is not in the header once.
inline std::string wgmma_gemm_with_producer_parity(const std::string& parity) {
  std::string header;
  for (const EmbeddedFile& f : device_headers())
    if (f.name == "dg_gemm_sm90.cuh") header = std::string(f.content);
  const size_t at = header.find(kRightProducerParity);
  if (at == std::string::npos || header.find(kRightProducerParity, at + 1) != std::string::npos)
    return "";
  header.replace(at, std::string(kRightProducerParity).size(), parity);
  header.replace(header.find("#pragma once"), 12, "");
  std::string source = kWgmmaGemmKernels;
  const std::string include = "#include \"dg_gemm_sm90.cuh\"\n";
  source.replace(source.find(include), include.size(), header);
  return source;
}

}  // namespace dg::emu::testing
