// Reading the SASS of a cubin with cuobjdump (from the PyPI packages nvidia-cuda-cuobjdump and
// nvidia-cuda-nvdisasm, which scripts/setup.sh installs into .venv): the static checks
// (tests/static) and `dyngen plan`'s performance model (runtime/model/perf_model.h) use it.
#pragma once
#include <map>
#include <string>

namespace dg {

// The cuobjdump to use: $DYNGEN_CUOBJDUMP, else the one in the source tree's .venv, else
// /usr/local/cuda/bin/cuobjdump, else one on PATH. Empty, with the places tried in *why, when
// there is none.
std::string find_cuobjdump(std::string* why);

// Disassembles `cubin` with `cuobjdump -sass` (nvdisasm must sit beside cuobjdump, as the wheels
// install them). Returns the SASS text of each function by name; on failure an empty map and the
// tool's output in *error.
std::map<std::string, std::string> sass_by_function(const std::string& cuobjdump,
                                                    const std::string& cubin, std::string* error);

// True when the SASS holds a tensor-core MMA: HMMA (mma.sync) or HGMMA (wgmma).
bool uses_tensor_cores(const std::string& sass);

}  // namespace dg
